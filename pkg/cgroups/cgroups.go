// Package cgroups finds this host's cgroup hierarchies and removes cgroup trees that
// kubelets left in them (the management cluster's nodes, real nodes in containers that
// share the host's hierarchies). A cgroup is a directory that can be removed only once it
// has no tasks and no children, so a tree goes deepest first.
package cgroups

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Root is where cgroup file systems are mounted.
const Root = "/sys/fs/cgroup"

// Hierarchies lists the mounted cgroup file systems under Root: every v1 hierarchy and, on a
// hybrid host, the unified one; on a cgroup v2 host, Root itself.
func Hierarchies() []string {
	ms, _ := mountinfo.GetMounts(mountinfo.FSTypeFilter("cgroup", "cgroup2"))
	var out []string
	for _, m := range ms {
		if (m.Mountpoint == Root || strings.HasPrefix(m.Mountpoint, Root+"/")) && !slices.Contains(out, m.Mountpoint) {
			out = append(out, m.Mountpoint)
		}
	}
	return out
}

// RemoveTree removes the cgroup root and every cgroup below it, deepest first. A missing
// root is no error.
func RemoveTree(root string) error {
	var dirs []string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	slices.Reverse(dirs) // children after their parents in WalkDir order
	var errs []error
	for _, d := range dirs {
		if err := rmdir(d); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// RemoveEverywhere removes the tree at rel ("/hostplane/node-1") in every hierarchy.
func RemoveEverywhere(rel string) error {
	var errs []error
	for _, h := range Hierarchies() {
		if err := RemoveTree(filepath.Join(h, rel)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// rmdir removes an empty cgroup; the kernel refuses (EBUSY) while a killed task is still
// exiting, so it tries for a few seconds.
func rmdir(d string) error {
	var err error
	if werr := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 5*time.Second, true,
		func(context.Context) (bool, error) {
			err = unix.Rmdir(d)
			return err == nil || errors.Is(err, unix.ENOENT), nil
		}); werr != nil {
		return fmt.Errorf("rmdir %s: %w", d, err)
	}
	return nil
}
