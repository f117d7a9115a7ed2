package bus

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/hostplane/hostplane/pkg/events"
)

// The KV buckets, one per owning daemon (ARCHITECTURE §3).
const (
	BucketClusters     = "clusters"     // clusterd
	BucketNodePools    = "nodepools"    // nodepoold
	BucketControlPlane = "controlplane" // componentd
	BucketPKI          = "pki"          // pkid
	BucketInfra        = "infra"        // infrad
	BucketIgnition     = "ignition"     // ignitiond
)

// DuplicateWindow is how long JetStream remembers a Nats-Msg-Id: a publish retried within it
// is stored once.
const DuplicateWindow = 2 * time.Minute

// StreamConfigs returns the configuration of hostplane's two streams. replicas is 1 for a
// single server and 3 for a NATS cluster.
func StreamConfigs(replicas int) []jetstream.StreamConfig {
	if replicas < 1 {
		replicas = 1
	}
	return []jetstream.StreamConfig{
		{
			Name:        events.EventsStream,
			Description: "hostplane state-change events: hostplane.evt.<cluster>.<resource>.<verb>",
			Subjects:    []string{events.EventPrefix + ".>"},
			Storage:     jetstream.FileStorage,
			Retention:   jetstream.LimitsPolicy,
			MaxAge:      7 * 24 * time.Hour,
			Duplicates:  DuplicateWindow,
			Replicas:    replicas,
		},
		{
			Name:        events.InboxStream,
			Description: "events from other systems: hostplane.in.<cluster>.<type>",
			Subjects:    []string{events.InboxPrefix + ".>"},
			Storage:     jetstream.FileStorage,
			Retention:   jetstream.LimitsPolicy,
			MaxAge:      7 * 24 * time.Hour,
			Duplicates:  DuplicateWindow,
			Replicas:    replicas,
		},
	}
}

// EnsureStreams creates or updates hostplane's streams. It is idempotent and safe to call
// from every daemon at start.
func EnsureStreams(ctx context.Context, js jetstream.JetStream) error {
	for _, cfg := range StreamConfigs(1) {
		if _, err := js.CreateOrUpdateStream(ctx, cfg); err != nil {
			return fmt.Errorf("ensure stream %s: %w", cfg.Name, err)
		}
	}
	return nil
}

// EnsureBucket creates (or opens) a KV bucket with file storage and a short history.
func EnsureBucket(ctx context.Context, js jetstream.JetStream, bucket string) (jetstream.KeyValue, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      bucket,
		Description: "hostplane state owned by one daemon",
		History:     5,
		Storage:     jetstream.FileStorage,
	})
	if err != nil {
		return nil, fmt.Errorf("ensure kv bucket %s: %w", bucket, err)
	}
	return kv, nil
}
