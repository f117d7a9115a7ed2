package release_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/hostplane/hostplane/pkg/release"
)

func TestState_FollowsTheCacheAndTheBuilder(t *testing.T) {
	t.Setenv("HOSTPLANE_CACHE_DIR", t.TempDir())
	rel := release.Latest()
	write := func(comp string) {
		t.Helper()
		p, err := rel.BinaryPath(comp)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	marker := func(pid int) {
		t.Helper()
		dir := filepath.Join(release.CacheDir(), "releases", "v"+rel.Version)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, ".building"), []byte(strconv.Itoa(pid)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	if got := rel.State(); got != release.NotBuilt {
		t.Fatalf("empty cache: %s, want NotBuilt", got)
	}
	if got := rel.Missing(); !slices.Equal(got, release.Components()) {
		t.Fatalf("empty cache: missing %v, want every component", got)
	}

	// A live builder holds the marker: Building.
	marker(os.Getpid())
	write(release.Etcd)
	if got := rel.State(); got != release.Building {
		t.Fatalf("with a live builder: %s, want Building", got)
	}
	if got := rel.Missing(); slices.Contains(got, release.Etcd) || len(got) != 3 {
		t.Fatalf("missing %v, want the three Kubernetes binaries", got)
	}

	// A builder that died (kill -9 leaves its marker): NotBuilt again.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	marker(dead.Process.Pid)
	if got := rel.State(); got != release.NotBuilt {
		t.Fatalf("with a dead builder's marker: %s, want NotBuilt", got)
	}

	for _, c := range release.Components() {
		write(c)
	}
	if got := rel.State(); got != release.Built {
		t.Fatalf("every binary there: %s, want Built", got)
	}
}
