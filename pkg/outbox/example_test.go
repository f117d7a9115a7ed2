package outbox_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/outbox"
)

// A daemon records the event, writes the key, then sends the event; its relay publishes
// whatever was recorded and not sent.
func Example() {
	dir, _ := os.MkdirTemp("", "outbox-example")
	defer os.RemoveAll(dir)
	srv, err := bus.RunEmbedded(bus.EmbeddedConfig{Port: -1, StoreDir: dir})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Stop()
	nc, _ := nats.Connect(srv.URL())
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = bus.EnsureStreams(ctx, js)
	kv, _ := bus.EnsureBucket(ctx, js, bus.BucketClusters)

	o, err := outbox.New(ctx, js, outbox.Config{Daemon: "clusterd"})
	if err != nil {
		fmt.Println(err)
		return
	}
	relay, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- o.Start(relay) }()

	// First the event, then the write it is about, then the event goes out. Had the process
	// died before Send, the relay would have published the event.
	e, err := o.Record(ctx, "demo", events.ResourceCluster, events.VerbClusterCreated, "demo", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := kv.Create(ctx, "demo", []byte(`{"name":"demo"}`)); err != nil {
		fmt.Println(err)
		return
	}
	o.Send(ctx, e)

	// A consumer of HOSTPLANE_EVENTS sees it.
	c, _ := js.OrderedConsumer(ctx, events.EventsStream, jetstream.OrderedConsumerConfig{})
	msg, err := c.Next(jetstream.FetchMaxWait(5 * time.Second))
	if err != nil {
		fmt.Println(err)
		return
	}
	ev, _ := events.Decode(msg.Data())
	fmt.Println(msg.Subject(), ev.Type, ev.Subject)
	stop()
	fmt.Println("relay stopped:", <-done)
	// Output:
	// hostplane.evt.demo.cluster.created io.hostplane.cluster.created demo
	// relay stopped: <nil>
}
