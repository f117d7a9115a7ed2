package natsauth_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/natsauth"
	"github.com/hostplane/hostplane/pkg/testenv"
)

// client is a connection as one identity that collects the server's permission errors.
type client struct {
	name string
	nc   *nats.Conn
	js   jetstream.JetStream
	errs chan error
}

func connect(t *testing.T, env *testenv.NATSEnv, name string) *client {
	t.Helper()
	c := &client{name: name, errs: make(chan error, 64)}
	opts, err := natsauth.ClientOptions(name, env.SeedFile(name), env.TLS)
	if err != nil {
		t.Fatal(err)
	}
	opts = append(opts, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		select {
		case c.errs <- err:
		default:
		}
	}))
	c.nc, c.js = testenv.Connect(t, env.Server.URL(), opts...)
	return c
}

// denied publishes to subject and expects the server to refuse it.
func (c *client) denied(t *testing.T, subject string) {
	t.Helper()
	_ = c.nc.Publish(subject, []byte("x"))
	_ = c.nc.Flush()
	c.expectViolation(t, subject)
}

// expectViolation waits for the server's permission error about subject.
func (c *client) expectViolation(t *testing.T, subject string) {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case err := <-c.errs:
			if errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), subject) {
				return
			}
		case <-timeout:
			t.Fatalf("%s: publishing to %s was not refused", c.name, subject)
		}
	}
}

// allowed publishes to subject through JetStream (a stream captures it) and expects an ack.
func (c *client) allowed(t *testing.T, subject string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.js.Publish(ctx, subject, []byte(`{}`)); err != nil {
		t.Fatalf("%s: publish to %s: %v", c.name, subject, err)
	}
}

func TestConnect_WithoutOrWithWrongCredentials_IsRefused(t *testing.T) {
	env := testenv.NATSWith(t, testenv.NATSOptions{AllowViolations: true})
	if nc, err := nats.Connect(env.Server.URL()); err == nil {
		nc.Close()
		t.Fatal("a client without credentials connected")
	} else if !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("no credentials: %v, want an authorization violation", err)
	}
	stranger, _ := nkeys.CreateUser()
	seed, _ := stranger.Seed()
	path := filepath.Join(t.TempDir(), "stranger.nk")
	if err := os.WriteFile(path, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	opt, err := nats.NkeyOptionFromSeed(path)
	if err != nil {
		t.Fatal(err)
	}
	if nc, err := nats.Connect(env.Server.URL(), opt); err == nil {
		nc.Close()
		t.Fatal("a client with an unknown nkey connected")
	} else if !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("unknown nkey: %v, want an authorization violation", err)
	}
	// bus.Connect gives up at once instead of retrying forever.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := bus.Connect(ctx, env.Server.URL(), "stranger", nil, opt); !errors.Is(err, nats.ErrAuthorization) || ctx.Err() != nil {
		t.Fatalf("bus.Connect with an unknown nkey: %v, want an authorization error before the deadline", err)
	}
}

func TestDaemonIdentity_IsConfinedToWhatTheTableSays(t *testing.T) {
	env := testenv.NATSWith(t, testenv.NATSOptions{AllowViolations: true})
	for _, d := range natsauth.Daemons {
		t.Run(d.Name, func(t *testing.T) {
			c := connect(t, env, d.Name)
			// Its own bucket and its own events: allowed.
			c.allowed(t, "$KV."+d.Owns+".probe")
			c.allowed(t, events.EventPrefix+".demo."+string(d.Publishes[0])+".probe")
			for _, other := range natsauth.Daemons {
				if other.Name == d.Name {
					continue
				}
				c.denied(t, "$KV."+other.Owns+".probe")
				c.denied(t, events.EventPrefix+".demo."+string(other.Publishes[0])+".created")
				c.denied(t, "hostplane.outbox."+other.Name)
			}
			for _, s := range []string{events.EventsStream, events.InboxStream, "KV_" + d.Owns} {
				c.denied(t, "$JS.API.STREAM.DELETE."+s)
				c.denied(t, "$JS.API.STREAM.UPDATE."+s)
				c.denied(t, "$JS.API.STREAM.PURGE."+s)
			}
			c.denied(t, events.InboxPrefix+".demo.cluster.upgrade") // only other systems send inbound events
			if !d.MayOpen(bus.BucketPKI) {
				c.denied(t, "$JS.API.STREAM.INFO.KV_pki")
				c.denied(t, "$JS.API.DIRECT.GET.KV_pki.$KV.pki.demo")
				c.denied(t, "$JS.API.CONSUMER.CREATE.KV_pki.w.$KV.pki.>")
			}
			// Replies of other identities are not readable.
			if _, err := c.nc.SubscribeSync("_INBOX.>"); err == nil {
				_ = c.nc.Flush()
				select {
				case err := <-c.errs:
					if !errors.Is(err, nats.ErrPermissionViolation) {
						t.Fatalf("subscribe _INBOX.>: %v", err)
					}
				case <-time.After(5 * time.Second):
					t.Fatal("subscribing to every reply inbox was not refused")
				}
			}
		})
	}
	// The table holds what the ISSUE promises: infrad and nodepoold-like daemons that do not
	// need keys never read the pki bucket.
	if d, _ := natsauth.LookupDaemon("infrad"); d.MayOpen(bus.BucketPKI) {
		t.Error("infrad may read the pki bucket, which it never needs")
	}
}

func TestClusterdEventStreams_CannotTouchOtherDurables(t *testing.T) {
	env := testenv.NATSWith(t, testenv.NATSOptions{AllowViolations: true, Identities: []natsauth.Identity{natsauth.EventConsumer("audit")}})
	c := connect(t, env, "clusterd")
	for _, durable := range []string{"pkid", "componentd", "audit"} {
		c.denied(t, "$JS.API.CONSUMER.CREATE."+events.EventsStream+"."+durable+".hostplane.evt.>")
		c.denied(t, "$JS.API.CONSUMER.MSG.NEXT."+events.EventsStream+"."+durable)
	}
	// The daemons' durables it cannot delete either; another system's it may, as the
	// consumer auditor (ConsumerAuditor) deletes push consumers.
	for _, durable := range []string{"pkid", "componentd"} {
		c.denied(t, "$JS.API.CONSUMER.DELETE."+events.EventsStream+"."+durable)
	}
}

// A push consumer of the events stream, whatever its deliver subject, is deleted: at once
// when it is created, and at the auditor's start for one made while none ran. A pull
// consumer stays.
func TestConsumerAuditor_DeletesEveryPushConsumerOfTheEventsStream(t *testing.T) {
	env := testenv.NATSWith(t, testenv.NATSOptions{Identities: []natsauth.Identity{natsauth.EventConsumer("audit"), natsauth.EventConsumer("reader")}})
	ctx := t.Context()
	reader := connect(t, env, "reader")
	if _, err := reader.js.CreateOrUpdateConsumer(ctx, events.EventsStream, jetstream.ConsumerConfig{
		Durable: "reader", FilterSubject: events.EventPrefix + ".>", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	audit := connect(t, env, "audit")
	push := func() {
		t.Helper()
		// What the client library will not make: a durable with a deliver subject outside
		// the creator's permissions (another tenant's inbound subject).
		req := `{"stream_name":"` + events.EventsStream + `","config":{"durable_name":"audit","deliver_subject":"hostplane.in.victim.cluster.hibernate","ack_policy":"none"}}`
		m, err := audit.nc.RequestWithContext(ctx, "$JS.API.CONSUMER.CREATE."+events.EventsStream+".audit", []byte(req))
		if err != nil || strings.Contains(string(m.Data), `"error"`) {
			t.Fatalf("create a push consumer: %v %s", err, m.Data)
		}
	}
	exists := func(name string) bool {
		t.Helper()
		m, err := env.Conn.RequestWithContext(ctx, "$JS.API.CONSUMER.INFO."+events.EventsStream+"."+name, nil)
		if err != nil {
			t.Fatal(err)
		}
		return !strings.Contains(string(m.Data), `"error"`)
	}
	push() // before any auditor: the start's sweep finds it

	cd := connect(t, env, "clusterd")
	deleted := prometheus.NewCounter(prometheus.CounterOpts{Name: "deleted"})
	a := &natsauth.ConsumerAuditor{NC: cd.nc, JS: cd.js, Log: slog.New(slog.NewTextHandler(t.Output(), nil)), Deleted: deleted}
	actx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Start(actx) }()
	t.Cleanup(func() { cancel(); <-done })
	testenv.Eventually(t, 10*time.Second, func() bool { return !exists("audit") }, "the push consumer made before the auditor started still exists")

	// A daemon's durable made while it runs is left alone, and not even looked up (the
	// daemons' durables are out of its reach: a look-up would be a violation, which fails
	// this test at cleanup).
	pk := connect(t, env, "pkid")
	if _, err := pk.js.CreateOrUpdateConsumer(ctx, events.EventsStream, jetstream.ConsumerConfig{
		Durable: "pkid", FilterSubject: events.EventPrefix + ".>", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	push() // while it runs: the advisory
	testenv.Eventually(t, 10*time.Second, func() bool { return !exists("audit") && testutil.ToFloat64(deleted) == 2 }, "the push consumer made while the auditor runs still exists")
	if !exists("pkid") {
		t.Error("the auditor deleted a daemon's durable")
	}
	if !exists("reader") {
		t.Error("the auditor deleted a pull consumer")
	}
}

// A daemon may not create or change its outbox stream or its dedup bucket (the bootstrap
// identity lays them out): a republish or a source there would publish past its permissions.
func TestDaemon_CannotChangeItsOutboxOrDedupStreams(t *testing.T) {
	env := testenv.NATSWith(t, testenv.NATSOptions{AllowViolations: true})
	for _, d := range []string{"clusterd", "pkid"} {
		c := connect(t, env, d)
		c.denied(t, "$JS.API.STREAM.UPDATE."+events.OutboxStream(d))
		c.denied(t, "$JS.API.STREAM.CREATE."+events.OutboxStream(d))
	}
	c := connect(t, env, "clusterd")
	c.denied(t, "$JS.API.STREAM.UPDATE.KV_"+events.DedupBucket("clusterd"))
	// The bootstrap identity made them.
	for _, name := range []string{events.OutboxStream("pkid"), "KV_" + events.DedupBucket("clusterd")} {
		if _, err := env.JS.Stream(t.Context(), name); err != nil {
			t.Errorf("stream %s not laid out: %v", name, err)
		}
	}
}

func TestInboxPublisher_MayOnlySendInboundEventsForItsClusters(t *testing.T) {
	env := testenv.NATSWith(t, testenv.NATSOptions{AllowViolations: true,
		Identities: []natsauth.Identity{natsauth.InboxPublisher("billing", "demo", "prod")}})
	c := connect(t, env, "billing")
	c.allowed(t, events.InboxPrefix+".demo.cluster.upgrade")
	c.allowed(t, events.InboxPrefix+".prod.nodepool.scale")
	c.denied(t, events.InboxPrefix+".other.cluster.upgrade")
	c.denied(t, events.EventPrefix+".demo.cluster.created")
	c.denied(t, "$KV.clusters.demo")
	c.denied(t, "$JS.API.STREAM.INFO.KV_pki")
	c.denied(t, "$JS.API.CONSUMER.CREATE."+events.InboxStream+".billing")
	c.denied(t, "$JS.API.STREAM.DELETE."+events.InboxStream)
}

func TestEventConsumer_ReadsThroughItsDurableAndPublishesNothing(t *testing.T) {
	env := testenv.NATSWith(t, testenv.NATSOptions{AllowViolations: true,
		Identities: []natsauth.Identity{natsauth.EventConsumer("audit")}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := env.JS.Publish(ctx, events.EventPrefix+".demo.cluster.created", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	c := connect(t, env, "audit")
	cons, err := c.js.CreateOrUpdateConsumer(ctx, events.EventsStream, jetstream.ConsumerConfig{
		Durable: "audit", FilterSubject: events.EventPrefix + ".>", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatalf("create its own durable: %v", err)
	}
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var got int
	for m := range batch.Messages() {
		if err := m.DoubleAck(ctx); err != nil {
			t.Fatalf("ack: %v", err)
		}
		got++
	}
	if got != 1 {
		t.Fatalf("fetched %d events, want 1 (%v)", got, batch.Error())
	}
	c.denied(t, events.EventPrefix+".demo.cluster.created")
	c.denied(t, events.InboxPrefix+".demo.cluster.upgrade")
	c.denied(t, "$KV.clusters.demo")
	c.denied(t, "$JS.API.CONSUMER.CREATE."+events.EventsStream+".pkid")
	c.denied(t, "$JS.API.CONSUMER.MSG.NEXT."+events.EventsStream+".pkid")
	c.denied(t, "$JS.API.CONSUMER.CREATE."+events.InboxStream+".audit")
}

func TestGenerate_KeepsSeedsAndWritesAServerConfig(t *testing.T) {
	dir := t.TempDir()
	a, err := natsauth.Generate(dir)
	if err != nil {
		t.Fatal(err)
	}
	seed1, _ := os.ReadFile(a.SeedFile("pkid"))
	b, err := natsauth.Generate(dir)
	if err != nil {
		t.Fatal(err)
	}
	seed2, _ := os.ReadFile(b.SeedFile("pkid"))
	if len(seed1) == 0 || string(seed1) != string(seed2) {
		t.Fatal("a second Generate changed (or did not write) pkid's seed")
	}
	for _, name := range natsauth.Names() {
		fi, err := os.Stat(a.SeedFile(name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", fi.Name(), fi.Mode().Perm())
		}
	}
	if _, err := natsauth.Generate(t.TempDir(), natsauth.EventConsumer("a.b")); !errors.Is(err, natsauth.ErrBadName) {
		t.Errorf("identity name with a dot: %v, want ErrBadName", err)
	}
	// The generated configuration is what a standalone nats-server loads.
	conf := filepath.Join(dir, "server.conf")
	if err := os.WriteFile(conf, []byte("port: -1\ninclude "+natsauth.ServerConfigFile+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatalf("nats-server rejects the generated config: %v", err)
	}
	want := a.ServerNkeys()
	if len(opts.Nkeys) != len(want) {
		t.Fatalf("config has %d users, want %d", len(opts.Nkeys), len(want))
	}
	for i, u := range opts.Nkeys {
		w := want[i]
		if u.Nkey != w.Nkey {
			t.Fatalf("user %d: key %s, want %s", i, u.Nkey, w.Nkey)
		}
		if w.Permissions == nil {
			continue
		}
		if !slices.Equal(u.Permissions.Publish.Allow, w.Permissions.Publish.Allow) ||
			!slices.Equal(u.Permissions.Subscribe.Allow, w.Permissions.Subscribe.Allow) {
			t.Fatalf("user %d: permissions differ from the table's", i)
		}
	}
}

// The table's publishers agree with events.Published, which a test in pkg/events checks
// against the daemons' code: every published event type is allowed to exactly its publishers.
func TestTable_AllowsEachPublishedEventToItsPublishersOnly(t *testing.T) {
	for _, p := range events.Published {
		subject := events.EventPrefix + ".demo." + string(p.Resource) + "." + p.Verb
		for _, d := range natsauth.Daemons {
			allow := d.Identity().Permissions.Publish.Allow
			may := slices.ContainsFunc(allow, func(a string) bool { return server.SubjectMatchesFilter(subject, a) })
			if want := p.PublishedBy(d.Name); may != want {
				t.Errorf("%s may publish %s: %v, want %v", d.Name, subject, may, want)
			}
		}
	}
}
