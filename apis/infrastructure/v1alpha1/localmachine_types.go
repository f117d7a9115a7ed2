package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// LocalMachine is one worker machine's Cluster API InfraMachine.
// +kubebuilder:object:generate=true
// +kubebuilder:object:root=true
type LocalMachine struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              LocalMachineSpec   `json:"spec,omitzero"`
	Status            LocalMachineStatus `json:"status,omitzero"`
}

// LocalMachineSpec is the machine's identity in the cloud and its shape.
// +kubebuilder:object:generate=true
type LocalMachineSpec struct {
	ProviderID string `json:"providerID,omitempty"`
	// InstanceType names the machine's shape in the local catalogue (api.LocalInstanceTypes);
	// empty is api.DefaultInstanceType. Set from the pool's LocalMachineTemplate.
	InstanceType string `json:"instanceType,omitempty"`
	// Zone places the machine (one of its type's zones; empty: infrad spreads the type's
	// machines over them) and CapacityType says on-demand (empty too) or spot: what Karpenter
	// chose for a NodeClaim.
	Zone         string `json:"zone,omitempty"`
	CapacityType string `json:"capacityType,omitempty"`
}

// LocalMachineStatus is the contract's status plus what the local cloud reports.
// +kubebuilder:object:generate=true
type LocalMachineStatus struct {
	Initialization Initialization             `json:"initialization,omitzero"`
	Addresses      []clusterv1.MachineAddress `json:"addresses,omitempty"`
	FailureDomain  string                     `json:"failureDomain,omitempty"` // the cloud machine's zone
	State          string                     `json:"state,omitempty"`
	NodeName       string                     `json:"nodeName,omitempty"`
	ConfigHash     string                     `json:"configHash,omitempty"`
	KubeletVersion string                     `json:"kubeletVersion,omitempty"`
	Fault          string                     `json:"fault,omitempty"`
	Boots          int32                      `json:"boots,omitempty"`
	Conditions     []metav1.Condition         `json:"conditions,omitempty"`
}

// LocalMachineList is a list of LocalMachines.
// +kubebuilder:object:generate=true
// +kubebuilder:object:root=true
type LocalMachineList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LocalMachine `json:"items"`
}
