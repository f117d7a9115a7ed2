package testenv

import (
	"sync"
	"testing"
)

var (
	guestOnce sync.Once
	guestDir  string
	guestErr  error
)

// GuestImagesDir is a directory holding hostplane-pause, hostplane-echo and hostplane-netd, the binaries of
// the guest images hostplane dev pushes to its registry (dev.Config.GuestImagesDir): built
// once per test process from the workspace the test runs in.
func GuestImagesDir(t testing.TB) string {
	t.Helper()
	guestOnce.Do(func() {
		guestDir, guestErr = buildTemp("hostplane-guest-images", map[string]string{
			"hostplane-pause": "github.com/hostplane/hostplane/cmd/hostplane/internal/guestimages/pause",
			"hostplane-echo":  "github.com/hostplane/hostplane/cmd/hostplane/internal/guestimages/echo",
			"hostplane-netd":  "github.com/hostplane/hostplane/cmd/hostplane/internal/guestimages/netd",
		})
	})
	if guestErr != nil {
		t.Fatal(guestErr)
	}
	return guestDir
}
