package component

import (
	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/services/componentd/internal/rollout"
)

// Observation is one component's state as its runtime sees it: what the runtimes hand the
// reconciler, which turns it into the component's api.ControlPlaneComponent (componentd's
// record).
type Observation struct {
	Component *Component
	// What should run: the release version, the replica count and their config hash.
	Version  string
	Replicas int
	Hash     string
	// What runs, and what the component's dependencies allow.
	Summary rollout.Summary
	Gate    rollout.Gate
	// WaitingFor names the components a closed Gate.Available waits for, when not
	// Component.StartsAfter (the kubernetes runtime holding a waking cluster's dependents
	// until kube-apiserver is Available).
	WaitingFor []string
	// ReplicaStatus has one entry per replica (the process runtime; the kubernetes runtime's
	// replicas are pods in the management cluster and are not listed).
	ReplicaStatus []api.ReplicaStatus
	// NotReady says why replicas are not ready, appended to the Available condition's message.
	NotReady string
	// Degraded, when not empty, makes the component Degraded with DegradedReason.
	Degraded, DegradedReason string
	// PKISerial is the serial of the PKI record Hash was computed from.
	PKISerial string
}
