package bus_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/testenv"
)

// lower sets a stream's limits as an operator would (nats stream edit).
func lower(t *testing.T, js jetstream.JetStream, stream string, edit func(*jetstream.StreamConfig)) {
	t.Helper()
	s, err := js.Stream(context.Background(), stream)
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	edit(&cfg)
	if _, err := js.UpdateStream(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
}

// A byte limit an operator set on a stream or bucket is kept when the layout runs again,
// and the inbox keeps its per-subject bound.
func TestLayout_KeepsAnOperatorsLimit(t *testing.T) {
	env := testenv.NATS(t)
	ctx := context.Background()
	if s, _ := env.JS.Stream(ctx, events.InboxStream); s.CachedInfo().Config.MaxMsgsPerSubject != bus.InboxMaxPerSubject {
		t.Errorf("inbox: %d messages per subject, want %d", s.CachedInfo().Config.MaxMsgsPerSubject, bus.InboxMaxPerSubject)
	}
	lower(t, env.JS, "KV_"+bus.BucketClusters, func(c *jetstream.StreamConfig) { c.MaxBytes = 1 << 20 })
	lower(t, env.JS, events.EventsStream, func(c *jetstream.StreamConfig) { c.MaxBytes = 4 << 20 })
	if err := bus.EnsureLayout(ctx, env.JS, 1); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int64{"KV_" + bus.BucketClusters: 1 << 20, events.EventsStream: 4 << 20} {
		s, _ := env.JS.Stream(ctx, name)
		if got := s.CachedInfo().Config.MaxBytes; got != want {
			t.Errorf("%s after the layout ran again: MaxBytes %d, want the operator's %d", name, got, want)
		}
	}
}

// A tenant flooding one inbound subject keeps only its newest events there (the per-subject
// limit); another tenant's inbound events are untouched.
func TestInbox_AFloodingTenantLosesOnlyItsOwnOldest(t *testing.T) {
	env := testenv.NATS(t)
	ctx := context.Background()
	lower(t, env.JS, events.InboxStream, func(c *jetstream.StreamConfig) { c.MaxMsgsPerSubject = 5 })
	quiet := events.InboxPrefix + ".quiet.nodepool.scale"
	if _, err := env.JS.Publish(ctx, quiet, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	noisy := events.InboxPrefix + ".noisy.nodepool.scale"
	for n := range 50 {
		if _, err := env.JS.Publish(ctx, noisy, fmt.Appendf(nil, `{"n":%d}`, n)); err != nil {
			t.Fatalf("inbound event %d: %v", n, err)
		}
	}
	s, _ := env.JS.Stream(ctx, events.InboxStream)
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(events.InboxPrefix+".>"))
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Subjects[noisy] != 5 || info.State.Subjects[quiet] != 1 {
		t.Fatalf("inbox holds %v, want 5 of %s and the 1 of %s", info.State.Subjects, noisy, quiet)
	}
	last, err := s.GetLastMsgForSubject(ctx, noisy)
	if err != nil || string(last.Data) != `{"n":49}` {
		t.Fatalf("newest %s: %s %v", noisy, last.Data, err)
	}
}

// The events stream, once full, drops its oldest events: publishing never fails for it.
func TestEvents_AFullStreamDropsTheOldest(t *testing.T) {
	env := testenv.NATS(t)
	ctx := context.Background()
	lower(t, env.JS, events.EventsStream, func(c *jetstream.StreamConfig) { c.MaxBytes = 32 << 10 })
	body := []byte(strings.Repeat("e", 1000))
	for n := range 100 {
		if _, err := env.JS.Publish(ctx, fmt.Sprintf("%s.demo.cluster.e%d", events.EventPrefix, n), body); err != nil {
			t.Fatalf("event %d into a full stream: %v", n, err)
		}
	}
	s, _ := env.JS.Stream(ctx, events.EventsStream)
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.FirstSeq <= 1 || info.State.LastSeq != 100 || info.State.Bytes > 32<<10 {
		t.Fatalf("stream state %+v, want the oldest dropped and the newest kept within 32 KiB", info.State)
	}
}
