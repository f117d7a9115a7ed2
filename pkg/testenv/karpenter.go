package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var (
	karpenterOnce sync.Once
	karpenterPath string
	karpenterErr  error
)

// KarpenterBinary is the hostplane-karpenter executable (cmd/hostplane-karpenter) a test's
// componentd runs as a cluster's autoscaler: HOSTPLANE_KARPENTER_BINARY when set (make build
// puts one in bin/), else built once per test process from the workspace the test runs in
// (the Go build cache makes that quick after the first time).
func KarpenterBinary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("HOSTPLANE_KARPENTER_BINARY"); p != "" {
		return p
	}
	karpenterOnce.Do(func() {
		var dir string
		if dir, karpenterErr = buildTemp("hostplane-karpenter", map[string]string{
			"hostplane-karpenter": "github.com/hostplane/hostplane/cmd/hostplane-karpenter"}); karpenterErr == nil {
			karpenterPath = filepath.Join(dir, "hostplane-karpenter")
		}
	})
	if karpenterErr != nil {
		t.Fatal(karpenterErr)
	}
	return karpenterPath
}

// buildTemp builds each package of bins (binary name → import path) from the workspace the
// test runs in, static, into a new temporary directory, and returns it.
func buildTemp(prefix string, bins map[string]string) (string, error) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", err
	}
	for bin, pkg := range bins {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, bin), pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("go build %s: %v\n%s", bin, err, out)
		}
	}
	return dir, nil
}
