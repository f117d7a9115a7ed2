package cgroups_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hostplane/hostplane/pkg/cgroups"
)

// A cgroup tree goes deepest first (rmdir of a directory with children fails); on a plain
// file system the same order removes a tree of empty directories.
func TestRemoveTree_RemovesChildrenBeforeParents(t *testing.T) {
	root := filepath.Join(t.TempDir(), "hostplane", "node-1")
	for _, d := range []string{"kubepods/besteffort/pod1/c1", "kubepods/burstable", "system"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := cgroups.RemoveTree(root); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Fatalf("%s is still there: %v", root, err)
	}
	if err := cgroups.RemoveTree(root); err != nil {
		t.Fatalf("a missing tree: %v", err)
	}
}

func TestHierarchies_AreCgroupMountsUnderRoot(t *testing.T) {
	for _, h := range cgroups.Hierarchies() {
		if h != cgroups.Root && filepath.Dir(h) != cgroups.Root {
			t.Errorf("hierarchy %s is not under %s", h, cgroups.Root)
		}
	}
	if len(cgroups.Hierarchies()) == 0 {
		t.Error("no cgroup file system is mounted here")
	}
}
