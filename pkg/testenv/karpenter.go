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
		dir, err := os.MkdirTemp("", "hostplane-karpenter")
		if err != nil {
			karpenterErr = err
			return
		}
		karpenterPath = filepath.Join(dir, "hostplane-karpenter")
		cmd := exec.Command("go", "build", "-o", karpenterPath, "github.com/hostplane/hostplane/cmd/hostplane-karpenter")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			karpenterErr = fmt.Errorf("go build hostplane-karpenter: %v\n%s", err, out)
		}
	})
	if karpenterErr != nil {
		t.Fatal(karpenterErr)
	}
	return karpenterPath
}
