package daemon_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/hostplane/hostplane/pkg/daemon"
	"github.com/hostplane/hostplane/pkg/natsauth"
	"github.com/hostplane/hostplane/pkg/testenv"
)

// A daemon told to stop returns from Run once its parts and its admin server stopped, not
// after the 10 s that bound the admin server's stop: a pod's SIGTERM or `docker stop` (which
// kills after 10 s) then ends it cleanly, and a replica hands over without delay.
func TestDaemon_Stop_ReturnsOnceItsAdminServerStopped(t *testing.T) {
	n := testenv.NATS(t)
	d, err := daemon.New(daemon.Base{
		NATSURL: n.Server.URL(), NATSNKeyFile: n.SeedFile(natsauth.Admin), DataDir: t.TempDir(), InsecureNoAuth: true,
		AdminAddr: "127.0.0.1:0",
		Logger:    slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
	}, daemon.Spec{Name: "testd"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	testenv.Eventually(t, 30*time.Second, func() bool { return d.Ready(t.Context()) == nil }, "daemon ready")

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run still running 5 s after its context ended: the stop waits out a timeout")
	}
}
