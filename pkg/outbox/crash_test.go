package outbox

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/natsauth"
	"github.com/hostplane/hostplane/pkg/testenv"
)

// The crash tests run this test binary again as a "daemon" that dies at a chosen point. The
// child reads what to do from these variables and never runs the tests.
const (
	childURLEnv  = "HOSTPLANE_OUTBOX_CHILD_NATS_URL"
	childModeEnv = "HOSTPLANE_OUTBOX_CHILD_MODE"
	childSeedEnv = "HOSTPLANE_OUTBOX_CHILD_NKEY_FILE" // the admin identity's seed

	// The child records and writes, then is killed before any relay runs.
	modeKillBeforePublish = "kill-before-publish"
	// The child records, writes and runs its relay, which is killed after the publish and
	// before the acknowledgement.
	modeKillBeforeAck = "kill-before-ack"

	stateBucket = "crashtest"
)

func TestMain(m *testing.M) {
	if url := os.Getenv(childURLEnv); url != "" {
		if err := crashChild(url, os.Getenv(childModeEnv)); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
		}
		return // exits 0: the parent fails the test, since the child was to be killed
	}
	m.Run()
}

// crashChild is the child process: it writes key "demo" the way a daemon does (record the
// event, then write the state), prints the event's id and dies by SIGKILL where its mode says.
func crashChild(url, mode string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	auth, err := nats.NkeyOptionFromSeed(os.Getenv(childSeedEnv))
	if err != nil {
		return err
	}
	nc, err := nats.Connect(url, auth)
	if err != nil {
		return err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	o, err := New(ctx, js, testConfig(prometheus.NewRegistry()))
	if err != nil {
		return err
	}
	kv, err := bus.EnsureBucket(ctx, js, stateBucket)
	if err != nil {
		return err
	}
	ev, err := o.Record(ctx, "demo", "cluster", "created", "demo", nil)
	if err != nil {
		return err
	}
	if _, err := kv.Put(ctx, "demo", []byte(`{"name":"demo"}`)); err != nil {
		return err
	}
	fmt.Println("id", ev.Event.ID)
	switch mode {
	case modeKillBeforePublish:
		return syscall.Kill(os.Getpid(), syscall.SIGKILL)
	case modeKillBeforeAck:
		o.afterPublish = func() {
			fmt.Println("published")
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
		return o.Start(ctx)
	}
	return fmt.Errorf("unknown mode %q", mode)
}

// runChild runs the child in mode against url, checks that SIGKILL ended it and returns the
// id of the event it recorded and the lines it printed.
func runChild(t *testing.T, env *testenv.NATSEnv, mode string) (id string, lines []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childURLEnv+"="+env.Server.URL(), childModeEnv+"="+mode, childSeedEnv+"="+env.SeedFile(natsauth.Admin))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child (%s) ended with %v, want killed by SIGKILL; stdout:\n%s\nstderr:\n%s", mode, err, stdout.String(), stderr.String())
	}
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if v, ok := strings.CutPrefix(sc.Text(), "id "); ok {
			id = v
		}
	}
	if id == "" {
		t.Fatalf("child (%s) printed no event id; stdout:\n%s\nstderr:\n%s", mode, stdout.String(), stderr.String())
	}
	return id, lines
}

// afterCrash checks the state a killed child left: its write stored, its event id published
// wantPublished times, and its entry still in the outbox.
func afterCrash(t *testing.T, js jetstream.JetStream, id string, wantPublished int) {
	t.Helper()
	ctx := context.Background()
	kv, err := js.KeyValue(ctx, stateBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(ctx, "demo"); err != nil {
		t.Fatalf("the child's write is not stored: %v", err)
	}
	if n := count(published(t, js), id); n != wantPublished {
		t.Fatalf("event %s published %d times by the killed child, want %d", id, n, wantPublished)
	}
	if n := entries(t, js, "testd"); n != 1 {
		t.Fatalf("outbox holds %d entries after the crash, want 1 (the child's)", n)
	}
}

// The crash test: a daemon killed between its write and the publish. The write
// happened and the event had not gone out; a relay started afterwards publishes it, once,
// and neither a second run nor a second relay publishes it again.
func TestOutbox_KilledBetweenWriteAndPublish_TheEventStillGoesOutOnce(t *testing.T) {
	env := testenv.NATS(t)
	id, _ := runChild(t, env, modeKillBeforePublish)
	afterCrash(t, env.JS, id, 0)

	first := newOutbox(t, env.JS, testConfig(prometheus.NewRegistry()))
	stop := startRelay(t, first)
	waitRelayed(t, env.JS, id, "by the relay started after the crash")
	stop()

	// Run the relay again, and a second one beside it; a marker recorded afterwards goes out
	// only after everything recorded before it, so once it is out nothing else is coming.
	startRelay(t, newOutbox(t, env.JS, testConfig(prometheus.NewRegistry())))
	second := newOutbox(t, env.JS, testConfig(prometheus.NewRegistry()))
	startRelay(t, second)
	marker := record(t, second, "marker", "created")
	testenv.Eventually(t, 10*time.Second, func() bool { return count(published(t, env.JS), marker.ID) == 1 },
		"the marker was not published")
	if n := count(published(t, env.JS), id); n != 1 {
		t.Errorf("event %s is in the events stream %d times, want 1", id, n)
	}
}

// A relay killed after its publish and before the acknowledgement: the entry is delivered
// again to the next relay, which publishes it again, and JetStream keeps one copy.
func TestOutbox_RelayKilledBeforeItsAck_TheEventIsStoredOnce(t *testing.T) {
	env := testenv.NATS(t)
	id, lines := runChild(t, env, modeKillBeforeAck)
	if !strings.Contains(strings.Join(lines, "\n"), "published") {
		t.Fatalf("the child was not killed after its publish; it printed %q", lines)
	}
	afterCrash(t, env.JS, id, 1)

	o := newOutbox(t, env.JS, testConfig(prometheus.NewRegistry()))
	startRelay(t, o)
	// The entry comes back after AckWait (1s here) and is published again as a duplicate.
	testenv.Eventually(t, 15*time.Second, func() bool { return entries(t, env.JS, "testd") == 0 },
		"the unacknowledged entry was not relayed again")
	if n := count(published(t, env.JS), id); n != 1 {
		t.Errorf("event %s is in the events stream %d times, want 1", id, n)
	}
}
