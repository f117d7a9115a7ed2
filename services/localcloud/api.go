// Package localcloud is the local platform's cloud: it runs simulated worker machines that
// outlive infrad restarts (a process of its own, cmd/localcloud) and speak the real
// protocols (Ignition over HTTPS, the kubelet's bootstrap, CSR, Node, Lease and pod status).
//
// infrad is its only client (Client); the API is HTTP on a unix socket (or TCP), served by
// Cloud.Run. Each machine lives in Config.Dir/machines/<cluster>/<name>/: machine.json (spec,
// status, pending in-place update), kubelet-client.key and .crt once joined, and root/, the
// files its Ignition config wrote. A restarted Cloud resumes every machine: a joined one
// renews its Lease again without a new CSR, one that had not joined boots again, a crashed
// one stays Stopped.
//
// A machine's life: boot (parse the Ignition stub, fetch and merge the config over HTTPS
// trusting only the stub's CA, write its files, read the kubelet files), join (kubelet
// client CSR with the bootstrap token, wait for approval and signing), then as
// system:node:<name> register the Node, renew its Lease and post its status, report its pods
// Running and delete those being deleted with grace period 0, and apply in-place updates
// (Reconfigure). Faults (api.Fault*) stop heartbeats, crash the machine or fail its next boot.
package localcloud

import "time"

// Machine states.
const (
	StateBooting = "Booting" // fetching Ignition and joining
	StateRunning = "Running" // joined: Node registered, heartbeats flowing
	StateFailed  = "Failed"  // the boot failed (Message says why); retried with backoff
	StateStopped = "Stopped" // crashed (fault) or powered off
)

// MachineSpec asks for one machine. Cluster and Name identify it (Name is the Cluster API
// Machine's name and becomes the node name); creating an existing machine is a no-op.
type MachineSpec struct {
	Cluster  string `json:"cluster"`
	Name     string `json:"name"`
	NodePool string `json:"nodePool"`
	// UserData is the bootstrap data (an Ignition stub) the machine boots with.
	UserData []byte `json:"userData"`
	// ProviderID is the Node's spec.providerID.
	ProviderID string `json:"providerID"`
	// InstanceType names the machine's shape in api.LocalInstanceTypes ("" is
	// api.DefaultInstanceType): its Node's capacity and labels. Zone is one of the type's
	// zones; "" lets the cloud pick the one with the fewest machines of the pool.
	InstanceType string `json:"instanceType,omitempty"`
	Zone         string `json:"zone,omitempty"`
	// CapacityType is api.CapacityTypeOnDemand ("" too) or api.CapacityTypeSpot.
	CapacityType string `json:"capacityType,omitempty"`
}

// MachineStatus is what a machine reports.
type MachineStatus struct {
	Cluster        string `json:"cluster"`
	Name           string `json:"name"`
	NodePool       string `json:"nodePool"`
	ProviderID     string `json:"providerID"`
	InstanceType   string `json:"instanceType,omitempty"`
	Zone           string `json:"zone,omitempty"`
	CapacityType   string `json:"capacityType,omitempty"`
	State          string `json:"state"`
	NodeName       string `json:"nodeName,omitempty"`
	ConfigHash     string `json:"configHash,omitempty"`     // of the Ignition payload last applied
	KubeletVersion string `json:"kubeletVersion,omitempty"` // "v1.34.4"
	Fault          string `json:"fault,omitempty"`          // api.Fault* injected, if any
	// PoweredOff is set while the machine is Stopped by a power-off (its cluster hibernates)
	// rather than a crash: powering it on resumes it as the same Node.
	PoweredOff bool      `json:"poweredOff,omitempty"`
	Message    string    `json:"message,omitempty"`
	Boots      int       `json:"boots"`
	CreatedAt  time.Time `json:"createdAt"`
}

// FaultRequest is the body of POST /machines/{cluster}/{name}/fault.
type FaultRequest struct {
	Type string `json:"type"` // api.Fault*
}

// PowerRequest is the body of POST /machines/{cluster}/{name}/power: off stops the machine
// (its disk, kubelet credentials and Node name stay), on resumes a powered-off one.
type PowerRequest struct {
	On bool `json:"on"`
}

// UserDataRequest is the body of POST /machines/{cluster}/{name}/userdata: the Ignition stub
// an InPlace update re-fetches the machine's config with.
type UserDataRequest struct {
	UserData []byte `json:"userData"`
}

// MachineList is the answer of GET /machines.
type MachineList struct {
	Items []MachineStatus `json:"items"`
}
