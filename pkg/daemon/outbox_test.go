package daemon_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/hostplane/hostplane/pkg/daemon"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/natsauth"
	"github.com/hostplane/hostplane/pkg/outbox"
	"github.com/hostplane/hostplane/pkg/testenv"
)

// An event a previous process of the daemon recorded and never published goes out once the
// daemon runs again: its relay is one of the daemon's parts.
func TestDaemon_OnStart_PublishesWhatItsOutboxHolds(t *testing.T) {
	n := testenv.NATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	previous, err := outbox.New(ctx, n.JS, outbox.Config{Daemon: "testd"})
	if err != nil {
		t.Fatal(err)
	}
	left, err := previous.Record(ctx, "demo", events.ResourceCluster, events.VerbClusterCreated, "demo", nil)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := n.Conn.SubscribeSync(left.Subject)
	if err != nil {
		t.Fatal(err)
	}

	d, err := daemon.New(daemon.Base{
		NATSURL: n.Server.URL(), NATSNKeyFile: n.SeedFile(natsauth.Admin), DataDir: t.TempDir(), InsecureNoAuth: true,
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
	}, daemon.Spec{Name: "testd"})
	if err != nil {
		t.Fatal(err)
	}
	run(t, d)

	msg, err := sub.NextMsg(20 * time.Second)
	if err != nil {
		t.Fatalf("the restarted daemon did not publish the event its outbox held: %v", err)
	}
	if got := msg.Header.Get("Nats-Msg-Id"); got != left.Event.ID {
		t.Errorf("published message id %q, want the recorded event's %q", got, left.Event.ID)
	}
}

// run runs d until the test ends, then checks that it stopped without an error.
func run(t *testing.T, d *daemon.Daemon) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}
