package natsauth

import (
	"slices"

	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/events"
)

// Daemon is what one daemon's code does on NATS, the input its permissions are generated
// from.
type Daemon struct {
	Name string
	// Owns is the KV bucket the daemon alone writes.
	Owns string
	// AlsoOwns are further KV buckets the daemon alone writes (componentd's backups).
	AlsoOwns []string
	// ObjectStores are the JetStream object stores the daemon alone writes and reads.
	ObjectStores []string
	// Reads are the other daemons' buckets it reads (gets, lists, watches).
	Reads []string
	// Publishes are the resources of hostplane.evt.<cluster>.<resource>.<verb> it publishes.
	Publishes []events.Resource
	// Consumers are its durable consumers on HOSTPLANE_EVENTS (reconcile controllers).
	Consumers []string
	// Inbound means the daemon owns inbound event types: it consumes HOSTPLANE_INBOX through
	// the durable <name>-inbox, remembers applied ids in its bucket inbox-<name> and answers
	// invalid events on hostplane.evt.<cluster>.inbox.rejected.
	Inbound bool
	// StreamsEvents means the daemon follows HOSTPLANE_EVENTS with ephemeral ordered
	// consumers (clusterd's GET /v1/clusters/{c}/events).
	StreamsEvents bool
	// AuditsConsumers means the daemon runs the ConsumerAuditor: it hears every consumer
	// created on HOSTPLANE_EVENTS and deletes the push consumers (see ConsumerAuditor).
	AuditsConsumers bool
}

// Daemons is the table: every daemon's use of NATS. A test runs the daemons against a server
// that enforces the permissions generated from it and fails on any violation.
var Daemons = []Daemon{
	{
		Name: "clusterd", Owns: bus.BucketClusters,
		// backups: a new cluster's spec.restoreFrom must name a complete backup.
		Reads:     []string{bus.BucketNodePools, bus.BucketIgnition, bus.BucketInfra, bus.BucketPKI, bus.BucketControlPlane, bus.BucketBackups},
		Publishes: []events.Resource{events.ResourceCluster},
		Consumers: []string{"clusterd"}, Inbound: true, StreamsEvents: true, AuditsConsumers: true,
	},
	{
		Name: "nodepoold", Owns: bus.BucketNodePools,
		// infra: its guest clients reach a single kube-apiserver directly (pkg/guest).
		Reads:     []string{bus.BucketClusters, bus.BucketIgnition, bus.BucketPKI, bus.BucketInfra},
		Publishes: []events.Resource{events.ResourceNodePool},
		Consumers: []string{"nodepoold"}, Inbound: true,
	},
	{
		Name: "componentd", Owns: bus.BucketControlPlane,
		// etcd backups: the records and the snapshots (docs/backups.md).
		AlsoOwns: []string{bus.BucketBackups}, ObjectStores: []string{bus.ObjectStoreSnapshots},
		Reads:     []string{bus.BucketClusters, bus.BucketInfra, bus.BucketPKI, bus.BucketNodePools},
		Publishes: []events.Resource{events.ResourceComponent, events.ResourceBackup},
		Consumers: []string{"componentd"},
	},
	{
		Name: "pkid", Owns: bus.BucketPKI,
		// nodepools: a kubelet CSR of a platform-none pool is approved without a Machine.
		Reads:     []string{bus.BucketClusters, bus.BucketInfra, bus.BucketControlPlane, bus.BucketNodePools},
		Publishes: []events.Resource{events.ResourcePKI},
		Consumers: []string{"pkid"},
	},
	{
		Name: "infrad", Owns: bus.BucketInfra,
		Reads:     []string{bus.BucketClusters, bus.BucketControlPlane},
		Publishes: []events.Resource{events.ResourceInfra, events.ResourceMachine},
		Consumers: []string{"infrad", "infrad-localcluster"}, Inbound: true,
	},
	{
		Name: "ignitiond", Owns: bus.BucketIgnition,
		Reads:     []string{bus.BucketClusters, bus.BucketInfra, bus.BucketPKI, bus.BucketNodePools},
		Publishes: []events.Resource{events.ResourceIgnition},
		Consumers: []string{"ignitiond"},
	},
}

// LookupDaemon returns the table's entry for a daemon.
func LookupDaemon(name string) (Daemon, bool) {
	i := slices.IndexFunc(Daemons, func(d Daemon) bool { return d.Name == name })
	if i < 0 {
		return Daemon{}, false
	}
	return Daemons[i], true
}

// MayOpen reports whether the daemon owns or reads bucket.
func (d Daemon) MayOpen(bucket string) bool {
	return d.Owns == bucket || slices.Contains(d.AlsoOwns, bucket) || slices.Contains(d.Reads, bucket)
}

// The identities that are not daemons.
const (
	// Bootstrap creates the shared streams (HOSTPLANE_EVENTS, HOSTPLANE_INBOX), the owners'
	// buckets and object stores (bus.EnsureLayout), and nothing else: no daemon may create, change or
	// delete them.
	Bootstrap = "bootstrap"
	// Admin may do anything: an operator's break-glass identity, and what tests use to play
	// other parts. Keep its seed offline in a deployment.
	Admin = "admin"
)

// Names are the identities Generate creates: the daemons, Bootstrap and Admin.
func Names() []string {
	out := []string{Bootstrap, Admin}
	for _, d := range Daemons {
		out = append(out, d.Name)
	}
	return out
}
