package events

import "slices"

// Verbs of the events hostplane publishes, per resource. A daemon publishes
// hostplane.evt.<cluster>.<resource>.<verb> with these verbs only, so that every event a
// consumer can see is listed in Published and documented in docs/events.md.
const (
	VerbClusterCreated  = "created"
	VerbClusterUpdated  = "updated"
	VerbClusterDeleting = "deleting"
	VerbClusterDeleted  = "deleted"
	VerbClusterStatus   = "status"

	VerbInfraReady   = "ready"
	VerbInfraDeleted = "deleted"

	VerbPKIReady   = "ready"
	VerbPKIRotated = "rotated"
	VerbPKIDeleted = "deleted"

	VerbComponentProgressing = "progressing"
	VerbComponentAvailable   = "available"
	VerbComponentDegraded    = "degraded"
	VerbComponentDeleted     = "deleted"

	VerbInboxRejected = "rejected"

	VerbNodePoolCreated  = "created"  // nodepoold: POST stored a new pool
	VerbNodePoolUpdated  = "updated"  // nodepoold: PATCH (or an inbound nodepool.scale) changed the spec
	VerbNodePoolDeleting = "deleting" // nodepoold: DELETE (or the cluster's deletion) began
	VerbNodePoolDeleted  = "deleted"  // nodepoold: every machine is gone and the key removed
	VerbNodePoolStatus   = "status"   // nodepoold: counts, version or conditions changed
	VerbNodePoolScaled   = "scaled"   // nodepoold: the autoscaler changed an autoscaled pool's size

	VerbIgnitionReady   = "ready"   // ignitiond: a pool's token and userdata for its current config hash are ready
	VerbIgnitionRotated = "rotated" // ignitiond: a pool's token was rotated (half-life); the userdata changed
	VerbIgnitionDeleted = "deleted" // ignitiond: a pool's (or cluster's) token records were removed
	VerbIgnitionServer  = "server"  // ignitiond: a cluster's HTTPS Ignition server opened, reloaded its cert, or closed

	VerbMachineCreated = "created" // infrad: the local cloud provisioned a machine
	VerbMachineJoined  = "joined"  // infrad: a machine's node registered and is Ready
	VerbMachineFaulted = "faulted" // infrad: a fault was injected
	VerbMachineDeleted = "deleted" // infrad: the machine is gone from the cloud
	VerbMachineStatus  = "status"  // infrad: a machine's phase or node changed

	VerbBackupCreated   = "created"   // componentd: a backup was asked for (on demand or by the schedule)
	VerbBackupCompleted = "completed" // componentd: its snapshot is stored
	VerbBackupFailed    = "failed"    // componentd: its snapshot could not be taken or stored
	VerbBackupDeleted   = "deleted"   // componentd: the record and its snapshot were removed
	VerbBackupRestored  = "restored"  // componentd: a cluster's etcd was restored from it
)

// PublishedEvent describes one event type hostplane publishes.
type PublishedEvent struct {
	Resource Resource
	Verb     string
	// Publishers are the daemons that publish it (the event's source is /hostplane/<daemon>):
	// one, except for types several daemons answer with (such as inbox.rejected, where each
	// inbound type's owner rejects its own).
	Publishers []string
	// Key is what the CloudEvent "subject" attribute holds: the KV key that changed.
	Key string
	// Data is what the "data" attribute carries ("" for none).
	Data string
	// When says what happened.
	When string
}

// PublishedBy reports whether daemon publishes the event type.
func (p PublishedEvent) PublishedBy(daemon string) bool { return slices.Contains(p.Publishers, daemon) }

// Type is the CloudEvent type, io.hostplane.<resource>.<verb>.
func (p PublishedEvent) Type() string { return TypePrefix + string(p.Resource) + "." + p.Verb }

// SubjectPattern is the NATS subject with a <cluster> placeholder.
func (p PublishedEvent) SubjectPattern() string {
	return EventPrefix + ".<cluster>." + string(p.Resource) + "." + p.Verb
}

// Published lists every event type hostplane publishes. docs/events.md documents each one and
// a test checks both against the daemons' code: add an entry here (and a section there) with
// every new verb.
var Published = []PublishedEvent{
	{Resource: ResourceCluster, Verb: VerbClusterCreated, Publishers: []string{"clusterd"}, Key: "<cluster>",
		When: "POST /v1/clusters stored a new cluster (generation 1)."},
	{Resource: ResourceCluster, Verb: VerbClusterUpdated, Publishers: []string{"clusterd"}, Key: "<cluster>",
		When: "PATCH /v1/clusters/{cluster} changed the spec (the generation was bumped), for example a release upgrade."},
	{Resource: ResourceCluster, Verb: VerbClusterDeleting, Publishers: []string{"clusterd"}, Key: "<cluster>",
		When: "DELETE /v1/clusters/{cluster} set the deletion timestamp and the Deleting condition; the other daemons release what they hold."},
	{Resource: ResourceCluster, Verb: VerbClusterDeleted, Publishers: []string{"clusterd"}, Key: "<cluster>",
		When: "Every other daemon released the cluster and clusterd removed its key; GET answers 404 from now on."},
	{Resource: ResourceCluster, Verb: VerbClusterStatus, Publishers: []string{"clusterd"}, Key: "<cluster>",
		When: "The aggregated status conditions of the cluster changed (Available, Progressing, Degraded, InfrastructureReady, PKIReady, ...)."},

	{Resource: ResourceInfra, Verb: VerbInfraReady, Publishers: []string{"infrad"}, Key: "<cluster>",
		When: "infrad allocated the cluster's endpoint and ports (and, for HighlyAvailable, started its load balancer)."},
	{Resource: ResourceInfra, Verb: VerbInfraDeleted, Publishers: []string{"infrad"}, Key: "<cluster>",
		When: "infrad released the cluster's ports and load balancer and deleted its infra record, after the control plane was gone."},

	{Resource: ResourceMachine, Verb: VerbMachineCreated, Publishers: []string{"infrad"}, Key: "<cluster>/<machine>", Data: "the api.Machine",
		When: "infrad created a LocalMachine's machine in the local cloud (with its Machine's bootstrap userdata) and set spec.providerID and status.initialization.provisioned."},
	{Resource: ResourceMachine, Verb: VerbMachineJoined, Publishers: []string{"infrad"}, Key: "<cluster>/<machine>", Data: "the api.Machine",
		When: "A machine first reported Running with a registered Node (once per machine)."},
	{Resource: ResourceMachine, Verb: VerbMachineFaulted, Publishers: []string{"infrad"}, Key: "<cluster>/<machine>", Data: "the api.Machine",
		When: "POST /v1/clusters/{cluster}/machines/{machine}/fault injected a fault on the machine."},
	{Resource: ResourceMachine, Verb: VerbMachineDeleted, Publishers: []string{"infrad"}, Key: "<cluster>/<machine>", Data: "the api.Machine",
		When: "infrad deleted a deleting LocalMachine's machine from the local cloud, just before it releases the LocalMachine's finalizer."},
	{Resource: ResourceMachine, Verb: VerbMachineStatus, Publishers: []string{"infrad"}, Key: "<cluster>/<machine>", Data: "the api.Machine",
		When: "What the local cloud reports of a machine changed: its state (Booting, Running, Failed, Stopped), node, applied config hash, kubelet version or fault."},

	{Resource: ResourceNodePool, Verb: VerbNodePoolCreated, Publishers: []string{"nodepoold"}, Key: "<cluster>/<nodepool>",
		When: "POST /v1/clusters/{cluster}/nodepools stored a new node pool (generation 1) with its config hash in status.configHash."},
	{Resource: ResourceNodePool, Verb: VerbNodePoolUpdated, Publishers: []string{"nodepoold"}, Key: "<cluster>/<nodepool>",
		When: "PATCH /v1/clusters/{cluster}/nodepools/{nodepool} or an inbound nodepool.scale changed the spec (the generation was bumped; status.configHash changed too if machines must roll)."},
	{Resource: ResourceNodePool, Verb: VerbNodePoolDeleting, Publishers: []string{"nodepoold"}, Key: "<cluster>/<nodepool>",
		When: "DELETE /v1/clusters/{cluster}/nodepools/{nodepool}, or the deletion of its cluster, set the pool's deletion timestamp; its machines are being removed."},
	{Resource: ResourceNodePool, Verb: VerbNodePoolDeleted, Publishers: []string{"nodepoold"}, Key: "<cluster>/<nodepool>",
		When: "Every machine and management object of the pool is gone and nodepoold removed its key; GET answers 404 from now on."},
	{Resource: ResourceNodePool, Verb: VerbNodePoolStatus, Publishers: []string{"nodepoold"}, Key: "<cluster>/<nodepool>",
		When: "The pool's machine counts, version, observed generation or conditions (Ready, AllNodesHealthy, UpdatingConfig, ...) changed."},
	{Resource: ResourceNodePool, Verb: VerbNodePoolScaled, Publishers: []string{"nodepoold"}, Key: "<cluster>/<nodepool>",
		When: "The autoscaler changed an autoscaled pool's size: status.autoscaling.lastScale has the sizes before and after, when, and why (the NodeClaim it launched or removed a machine for)."},

	{Resource: ResourceIgnition, Verb: VerbIgnitionReady, Publishers: []string{"ignitiond"}, Key: "<cluster>/<nodepool>",
		When: "ignitiond minted a pool's token for a new config hash (the pool's first, or a rollout's; the replaced token stays valid for the grace period) and wrote its userdata, ready for nodepoold to copy into the userdata Secret of that hash."},
	{Resource: ResourceIgnition, Verb: VerbIgnitionRotated, Publishers: []string{"ignitiond"}, Key: "<cluster>/<nodepool>",
		When: "ignitiond rotated a pool's token at half its lifetime: same config hash, new token, so the userdata changed (nodepoold updates the Secret in place; no rollout)."},
	{Resource: ResourceIgnition, Verb: VerbIgnitionDeleted, Publishers: []string{"ignitiond"}, Key: "<cluster>/<nodepool>",
		When: "ignitiond deleted a pool's token record (the pool, or its cluster, is gone or deleting); its tokens are refused from now on. With key <cluster>: the cluster's Ignition server record was deleted and its listener closed."},
	{Resource: ResourceIgnition, Verb: VerbIgnitionServer, Publishers: []string{"ignitiond"}, Key: "<cluster>",
		When: "A cluster's Ignition server record changed: its HTTPS listener opened on the endpoint infrad allocated, its certificate was swapped after a PKI rotation (new certSerial), or it waits for infra or PKI (ready false, with a message)."},

	{Resource: ResourcePKI, Verb: VerbPKIReady, Publishers: []string{"pkid"}, Key: "<cluster>", Data: `{"serial": "<bundle serial>"}`,
		When: "pkid issued the cluster's CAs, leaf certificates, service-account key and kubeconfigs for the first time."},
	{Resource: ResourcePKI, Verb: VerbPKIRotated, Publishers: []string{"pkid"}, Key: "<cluster>", Data: `{"serial": "<bundle serial>"}`,
		When: "pkid renewed leaf certificates (before expiry or on POST /v1/clusters/{cluster}/pki/rotate); the serial changed."},
	{Resource: ResourcePKI, Verb: VerbPKIDeleted, Publishers: []string{"pkid"}, Key: "<cluster>",
		When: "pkid deleted the cluster's PKI bundle, after the control plane was gone."},

	{Resource: ResourceComponent, Verb: VerbComponentProgressing, Publishers: []string{"componentd"}, Key: "<cluster>/<component>", Data: "the api.ControlPlaneComponent",
		When: "A control-plane component's Available, RolloutComplete or Degraded condition changed and it is rolling out (not yet Available with its rollout complete)."},
	{Resource: ResourceComponent, Verb: VerbComponentAvailable, Publishers: []string{"componentd"}, Key: "<cluster>/<component>", Data: "the api.ControlPlaneComponent",
		When: "A control-plane component became Available with its rollout complete."},
	{Resource: ResourceComponent, Verb: VerbComponentDegraded, Publishers: []string{"componentd"}, Key: "<cluster>/<component>", Data: "the api.ControlPlaneComponent",
		When: "A control-plane component became Degraded (crash-looping replicas) or lost its availability."},
	{Resource: ResourceComponent, Verb: VerbComponentDeleted, Publishers: []string{"componentd"}, Key: "<cluster>/<component>",
		When: "componentd stopped every process of the component and removed its files and KV key (cluster deletion)."},

	{Resource: ResourceInbox, Verb: VerbInboxRejected, Publishers: []string{"clusterd", "nodepoold", "infrad"}, Key: "<cluster>",
		Data: `{"id": "<inbound event id>", "type": "<inbound type>", "subject": "<inbound subject>", "reason": "<why>"}`,
		When: "An inbound event on hostplane.in.<cluster>.<type> was not applied: malformed, unknown type, invalid data, unknown cluster, refused by its owner or a replay of an id already applied. Nothing changed."},

	{Resource: ResourceBackup, Verb: VerbBackupCreated, Publishers: []string{"componentd"}, Key: "<cluster>/<backup>", Data: "the api.Backup",
		When: "POST /v1/clusters/{cluster}/backups, or the cluster's spec.etcd.backup.schedule, stored a new backup (Complete False, reason InProgress); componentd takes the snapshot next."},
	{Resource: ResourceBackup, Verb: VerbBackupCompleted, Publishers: []string{"componentd"}, Key: "<cluster>/<backup>", Data: "the api.Backup",
		When: "The backup's etcd snapshot is in the object store: Complete True, with its size, etcd revision, member and sha256."},
	{Resource: ResourceBackup, Verb: VerbBackupFailed, Publishers: []string{"componentd"}, Key: "<cluster>/<backup>", Data: "the api.Backup",
		When: "The snapshot could not be taken or stored: Complete False, reason Failed, with the message."},
	{Resource: ResourceBackup, Verb: VerbBackupDeleted, Publishers: []string{"componentd"}, Key: "<cluster>/<backup>", Data: "the api.Backup",
		When: "DELETE /v1/clusters/{cluster}/backups/{backup}, or the schedule's retention, removed the backup and its snapshot."},
	{Resource: ResourceBackup, Verb: VerbBackupRestored, Publishers: []string{"componentd"}, Key: "<cluster>", Data: `{"cluster": "<cluster the backup was taken of>", "backup": "<backup>", "inPlace": true|false}`,
		When: "componentd restored the etcd members of a cluster from the backup: a new cluster's spec.restoreFrom before its etcd first started, or POST /v1/clusters/{cluster}/backups/{backup}/restore in place. The subject's cluster is the restored one."},
}
