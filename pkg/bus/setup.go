package bus

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
	// BucketBackups holds the etcd backups of every cluster (api.Backup, key
	// "<cluster>.<backup>"); componentd, which runs etcd, is its only writer.
	BucketBackups = "backups" // componentd
)

// ObjectStoreSnapshots is the JetStream object store that holds the etcd snapshot of every
// backup (object "<cluster>/<backup>"); componentd alone writes it. It has the deployment's
// replica count, like the buckets, so a snapshot survives losing a NATS server.
const ObjectStoreSnapshots = "etcd-snapshots"

// Buckets are the owners' buckets: one per daemon, and componentd's backups.
var Buckets = []string{BucketClusters, BucketNodePools, BucketControlPlane, BucketPKI, BucketInfra, BucketIgnition, BucketBackups}

// ObjectStores are the owners' object stores.
var ObjectStores = []string{ObjectStoreSnapshots}

// BucketLeases holds one lease per daemon (pkg/leader): the replica that holds its daemon's
// lease is the one that works. Its entries expire LeaseTTL after their last renewal, so a
// dead holder's lease is gone by then. Bootstrap creates it (EnsureLayout); each daemon may
// read and write its own key only.
const BucketLeases = "leases"

// LeaseTTL is how long a lease outlives its holder's last renewal: the longest a crashed
// replica's work waits for a standby.
const LeaseTTL = 10 * time.Second

// EnsureLeaseBucket creates or opens the lease bucket with replicas copies.
func EnsureLeaseBucket(ctx context.Context, js jetstream.JetStream, replicas int) (jetstream.KeyValue, error) {
	return EnsureKeyValue(ctx, js, jetstream.KeyValueConfig{
		Bucket:      BucketLeases,
		Description: "hostplane daemon leases: the replica that holds one works",
		History:     1,
		TTL:         LeaseTTL,
		Storage:     jetstream.FileStorage,
		Replicas:    max(replicas, 1),
	})
}

// InboxMaxPerSubject bounds the events HOSTPLANE_INBOX keeps per
// hostplane.in.<cluster>.<type>: a tenant flooding one of its subjects loses its own oldest
// events there, and the stream does not fill for the others. Byte limits (MaxBytes) are
// the operator's to set (docs/operations.md "Store limits"): JetStream reserves a stream's
// MaxBytes on every server that holds it, so a default would have to fit the smallest
// deployment's storage. The layout keeps a byte limit an operator set.
const InboxMaxPerSubject = 1000

// limited is want, or have when have is set (an operator's value is kept).
func limited(have, want int64) int64 {
	if have > 0 {
		return have
	}
	return want
}

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
			Discard:     jetstream.DiscardOld,
			Duplicates:  DuplicateWindow,
			Replicas:    replicas,
		},
		{
			Name:              events.InboxStream,
			Description:       "events from other systems: hostplane.in.<cluster>.<type>",
			Subjects:          []string{events.InboxPrefix + ".>"},
			Storage:           jetstream.FileStorage,
			Retention:         jetstream.LimitsPolicy,
			MaxAge:            7 * 24 * time.Hour,
			MaxMsgsPerSubject: InboxMaxPerSubject,
			Discard:           jetstream.DiscardNew,
			Duplicates:        DuplicateWindow,
			Replicas:          replicas,
		},
	}
}

// MaxReplicas is the most replicas JetStream keeps of a stream or bucket.
const MaxReplicas = 5

// EnsureStreams creates or updates hostplane's streams with one replica (a single NATS
// server). It is idempotent and safe to call from every daemon at start.
func EnsureStreams(ctx context.Context, js jetstream.JetStream) error {
	return EnsureStreamsReplicated(ctx, js, 1)
}

// EnsureStreamsReplicated is EnsureStreams on a NATS cluster: each stream keeps replicas
// copies (3 on a 3-server cluster, so losing a server loses nothing). An existing stream is
// updated to that many replicas.
func EnsureStreamsReplicated(ctx context.Context, js jetstream.JetStream, replicas int) error {
	for _, cfg := range StreamConfigs(replicas) {
		if _, err := EnsureStream(ctx, js, cfg); err != nil {
			return err
		}
	}
	return nil
}

// EnsureLayout creates or updates what no single daemon owns: the shared streams, the
// owners' buckets and their object stores, and the lease bucket. A deployment with NATS permissions runs it as the bootstrap identity
// (pkg/natsauth) before the daemons start; the daemons then only look them up.
func EnsureLayout(ctx context.Context, js jetstream.JetStream, replicas int) error {
	if err := EnsureStreamsReplicated(ctx, js, replicas); err != nil {
		return err
	}
	for _, b := range Buckets {
		if _, err := EnsureBucketReplicated(ctx, js, b, replicas); err != nil {
			return err
		}
	}
	for _, o := range ObjectStores {
		if _, err := EnsureObjectStore(ctx, js, o, replicas); err != nil {
			return err
		}
	}
	_, err := EnsureLeaseBucket(ctx, js, replicas)
	return err
}

// OutboxStreamConfig is the configuration of daemon's outbox stream (pkg/outbox): a work
// queue (an entry goes when the relay acknowledges it) on file storage that never expires
// entries. The bootstrap identity creates it (natsauth.EnsureLayout); the daemon only opens it.
func OutboxStreamConfig(daemon string, replicas int) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        events.OutboxStream(daemon),
		Description: "events " + daemon + " recorded and has not published yet (hostplane outbox)",
		Subjects:    []string{events.OutboxSubject(daemon)},
		Retention:   jetstream.WorkQueuePolicy,
		Storage:     jetstream.FileStorage,
		Discard:     jetstream.DiscardNew,
		Duplicates:  DuplicateWindow,
		Replicas:    max(replicas, 1),
	}
}

// DefaultDedupTTL is how long an applied inbound event id is remembered (pkg/inbox): as
// long as HOSTPLANE_INBOX keeps messages.
const DefaultDedupTTL = 7 * 24 * time.Hour

// DedupBucketConfig is the configuration of daemon's bucket of applied inbound event ids
// (pkg/inbox), whose entries expire after ttl (DefaultDedupTTL when zero). The bootstrap
// identity creates it (natsauth.EnsureLayout); the daemon only opens it.
func DedupBucketConfig(daemon string, ttl time.Duration, replicas int) jetstream.KeyValueConfig {
	if ttl <= 0 {
		ttl = DefaultDedupTTL
	}
	return jetstream.KeyValueConfig{
		Bucket:      events.DedupBucket(daemon),
		Description: "inbound event ids " + daemon + " applied",
		History:     1,
		TTL:         ttl,
		Storage:     jetstream.FileStorage,
		Replicas:    max(replicas, 1),
	}
}

// OpenOrCreateStream opens stream cfg.Name as it is, or creates it when it does not exist
// (an identity that may not create it, a daemon, gets the server's refusal: the bootstrap
// identity lays it out).
func OpenOrCreateStream(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	s, err := js.Stream(ctx, cfg.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		if s, err = js.CreateStream(ctx, cfg); err != nil {
			return nil, fmt.Errorf("stream %s is not laid out (hostplane credentials bootstrap makes it) and cannot be created here: %w", cfg.Name, replicaHint(err, cfg.Replicas))
		}
	}
	if err != nil {
		return nil, fmt.Errorf("open stream %s: %w", cfg.Name, err)
	}
	return s, nil
}

// OpenOrCreateKeyValue is OpenOrCreateStream for a KV bucket.
func OpenOrCreateKeyValue(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, cfg.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		if kv, err = js.CreateKeyValue(ctx, cfg); err != nil {
			return nil, fmt.Errorf("bucket %s is not laid out (hostplane credentials bootstrap makes it) and cannot be created here: %w", cfg.Bucket, replicaHint(err, cfg.Replicas))
		}
	}
	if err != nil {
		return nil, fmt.Errorf("open bucket %s: %w", cfg.Bucket, err)
	}
	return kv, nil
}

// EnsureObjectStore opens the object store when it exists with these settings (file
// storage, replicas copies), else creates or updates it.
func EnsureObjectStore(ctx context.Context, js jetstream.JetStream, bucket string, replicas int) (jetstream.ObjectStore, error) {
	cfg := jetstream.ObjectStoreConfig{
		Bucket:      bucket,
		Description: "hostplane objects owned by one daemon",
		Storage:     jetstream.FileStorage,
		Replicas:    max(replicas, 1),
	}
	if s, err := js.Stream(ctx, "OBJ_"+bucket); err == nil {
		c := s.CachedInfo().Config
		if c.Description == cfg.Description && c.Storage == cfg.Storage && c.Replicas == cfg.Replicas {
			return js.ObjectStore(ctx, bucket)
		}
		cfg.MaxBytes = limited(c.MaxBytes, cfg.MaxBytes)
	}
	o, err := js.CreateOrUpdateObjectStore(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("ensure object store %s: %w", bucket, replicaHint(err, replicas))
	}
	if cfg.Replicas <= 1 {
		return o, nil
	}
	if changed, err := leaderReads(ctx, js, "OBJ_"+bucket); err != nil || !changed {
		return o, err
	}
	return js.ObjectStore(ctx, bucket)
}

// EnsureStream creates or updates one stream (an error names the stream and, when cfg asks
// for more than one replica, what the NATS cluster needs for that). A stream that exists
// with cfg's settings is only looked up, so an identity without the right to change it
// (pkg/natsauth) may ensure it.
func EnsureStream(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	if s, err := js.Stream(ctx, cfg.Name); err == nil && sameStream(s.CachedInfo().Config, cfg) {
		return s, nil
	}
	if s, err := js.Stream(ctx, cfg.Name); err == nil {
		cfg.MaxBytes = limited(s.CachedInfo().Config.MaxBytes, cfg.MaxBytes)
	}
	s, err := js.CreateOrUpdateStream(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("ensure stream %s: %w", cfg.Name, replicaHint(err, cfg.Replicas))
	}
	return s, nil
}

// EnsureBucket creates (or opens) a KV bucket with file storage and a short history, with one
// replica.
func EnsureBucket(ctx context.Context, js jetstream.JetStream, bucket string) (jetstream.KeyValue, error) {
	return EnsureBucketReplicated(ctx, js, bucket, 1)
}

// EnsureBucketReplicated is EnsureBucket with replicas copies on a NATS cluster.
// A bucket that exists with these settings is only opened.
// With more than one replica every read goes to the stream's leader (leaderReads).
func EnsureBucketReplicated(ctx context.Context, js jetstream.JetStream, bucket string, replicas int) (jetstream.KeyValue, error) {
	kv, err := EnsureKeyValue(ctx, js, jetstream.KeyValueConfig{
		Bucket:      bucket,
		Description: "hostplane state owned by one daemon",
		History:     5,
		Storage:     jetstream.FileStorage,
		Replicas:    max(replicas, 1),
	})
	if err != nil || replicas <= 1 {
		return kv, err
	}
	if changed, err := leaderReads(ctx, js, "KV_"+bucket); err != nil || !changed {
		return kv, err
	}
	return js.KeyValue(ctx, bucket) // opened again: the handle chose its way of reading when opened
}

// leaderReads makes every read of a replicated stream go to its leader (no direct gets),
// and reports whether it had to change the stream. nats.go's buckets and object stores
// read with direct gets, which any replica answers: a follower that has not applied the
// latest write yet answers with what was there before, so a key created and read back at
// once is "not found" (seen on deploy/compose's three NATS servers). Reads through the
// leader see every write it acknowledged.
func leaderReads(ctx context.Context, js jetstream.JetStream, stream string) (bool, error) {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return false, fmt.Errorf("stream %s: %w", stream, err)
	}
	cfg := s.CachedInfo().Config
	if !cfg.AllowDirect {
		return false, nil
	}
	cfg.AllowDirect = false
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		return false, fmt.Errorf("stream %s: read through its leader: %w", stream, err)
	}
	return true, nil
}

// EnsureKeyValue opens the bucket cfg describes when it exists with cfg's settings, else
// creates or updates it.
func EnsureKeyValue(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	replicas, bucket := cfg.Replicas, cfg.Bucket
	if s, err := js.Stream(ctx, "KV_"+bucket); err == nil {
		c := s.CachedInfo().Config
		if c.Description == cfg.Description && c.MaxMsgsPerSubject == int64(max(cfg.History, 1)) && c.Storage == cfg.Storage &&
			c.Replicas == max(cfg.Replicas, 1) && c.MaxAge == cfg.TTL {
			return js.KeyValue(ctx, bucket)
		}
		cfg.MaxBytes = limited(c.MaxBytes, cfg.MaxBytes)
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("ensure kv bucket %s: %w", bucket, replicaHint(err, replicas))
	}
	return kv, nil
}

// sameStream reports whether an existing stream has the settings hostplane gives it.
func sameStream(have, want jetstream.StreamConfig) bool {
	return slices.Equal(have.Subjects, want.Subjects) && have.Description == want.Description &&
		have.Retention == want.Retention && have.Storage == want.Storage && have.MaxAge == want.MaxAge &&
		have.Duplicates == want.Duplicates && have.Replicas == max(want.Replicas, 1) &&
		have.Discard == want.Discard &&
		perSubject(have.MaxMsgsPerSubject) == perSubject(want.MaxMsgsPerSubject) && have.DiscardNewPerSubject == want.DiscardNewPerSubject
}

// perSubject is a messages-per-subject limit as JetStream reports it (-1: none).
func perSubject(n int64) int64 {
	if n <= 0 {
		return -1
	}
	return n
}

// replicaHint adds to a JetStream error what an operator should check when more than one
// replica was asked for: the setting and the size of the NATS cluster.
func replicaHint(err error, replicas int) error {
	if replicas <= 1 {
		return err
	}
	return fmt.Errorf("%w (HOSTPLANE_NATS_REPLICAS=%d needs a NATS cluster with JetStream on at least %d servers)", err, replicas, replicas)
}
