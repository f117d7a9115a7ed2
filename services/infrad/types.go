package infrad

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	crscheme "sigs.k8s.io/controller-runtime/pkg/scheme"

	"github.com/hostplane/hostplane/pkg/api"
)

// The Go side of the provider's CRDs (crds/*.yaml, group api.InfrastructureGroup, version
// api.InfrastructureVersion): LocalCluster and LocalMachine. LocalMachineTemplate is only a
// CRD: infrad never reads it (Cluster API copies its spec.template into each LocalMachine).

// InfrastructureGroupVersion is the provider's API group and version.
var InfrastructureGroupVersion = schema.GroupVersion{Group: api.InfrastructureGroup, Version: api.InfrastructureVersion}

// Kinds of the provider.
const (
	KindLocalCluster         = "LocalCluster"
	KindLocalMachine         = "LocalMachine"
	KindLocalMachineTemplate = "LocalMachineTemplate"
)

// Names the provider puts on its objects.
const (
	// FinalizerLocalMachine holds a LocalMachine until infrad deleted its cloud machine.
	FinalizerLocalMachine = api.InfrastructureGroup + "/localmachine"
	// AnnotationAppliedUserData on a LocalMachine names the userdata Secret the cloud machine
	// last booted or was reconfigured with (compared with the Machine's
	// api.AnnotationDesiredUserData).
	AnnotationAppliedUserData = "hostplane.dev/applied-userdata"
	// AnnotationTerminatingNotice on a Cluster API Machine is the id of the inbound
	// machine.terminating event infrad deleted the Machine for (docs/inbound-events.md).
	AnnotationTerminatingNotice = "hostplane.dev/terminating-notice"
	// ConditionReady is the condition Cluster API mirrors into InfrastructureReady.
	ConditionReady = "Ready"
)

// Reasons of the LocalMachine Ready condition (besides the cloud states, which are reasons
// of their own: Booting, Running, Failed, Stopped).
const (
	ReasonWaitingForMachine       = "WaitingForMachine"
	ReasonWaitingForBootstrapData = "WaitingForBootstrapData"
	ReasonNoLocalCloud            = "LocalCloudNotConfigured"
	ReasonCloudError              = "LocalCloudError"
	ReasonNotFound                = "NotFoundInCloud"
	ReasonDeleting                = "Deleting"
	ReasonProvisioned             = "Provisioned"
)

// Initialization is the Cluster API contract's status.initialization.
type Initialization struct {
	Provisioned *bool `json:"provisioned,omitempty"`
}

// LocalCluster is a cluster's Cluster API InfraCluster.
type LocalCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              LocalClusterSpec   `json:"spec,omitzero"`
	Status            LocalClusterStatus `json:"status,omitzero"`
}

// LocalClusterSpec is where the cluster's API is.
type LocalClusterSpec struct {
	ControlPlaneEndpoint clusterv1.APIEndpoint `json:"controlPlaneEndpoint,omitzero"`
}

// LocalClusterStatus reports the cluster's infrastructure to Cluster API.
type LocalClusterStatus struct {
	Initialization Initialization     `json:"initialization,omitzero"`
	Conditions     []metav1.Condition `json:"conditions,omitempty"`
}

// LocalClusterList is a list of LocalClusters.
type LocalClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LocalCluster `json:"items"`
}

// LocalMachine is one worker machine's Cluster API InfraMachine.
type LocalMachine struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              LocalMachineSpec   `json:"spec,omitzero"`
	Status            LocalMachineStatus `json:"status,omitzero"`
}

// LocalMachineSpec is the machine's identity in the cloud.
type LocalMachineSpec struct {
	ProviderID string `json:"providerID,omitempty"`
}

// LocalMachineStatus is the contract's status plus what the local cloud reports.
type LocalMachineStatus struct {
	Initialization Initialization             `json:"initialization,omitzero"`
	Addresses      []clusterv1.MachineAddress `json:"addresses,omitempty"`
	FailureDomain  string                     `json:"failureDomain,omitempty"`
	State          string                     `json:"state,omitempty"`
	NodeName       string                     `json:"nodeName,omitempty"`
	ConfigHash     string                     `json:"configHash,omitempty"`
	KubeletVersion string                     `json:"kubeletVersion,omitempty"`
	Fault          string                     `json:"fault,omitempty"`
	Boots          int32                      `json:"boots,omitempty"`
	Conditions     []metav1.Condition         `json:"conditions,omitempty"`
}

// LocalMachineList is a list of LocalMachines.
type LocalMachineList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LocalMachine `json:"items"`
}

// AddToScheme registers the provider's kinds.
var AddToScheme = (&crscheme.Builder{GroupVersion: InfrastructureGroupVersion}).
	Register(&LocalCluster{}, &LocalClusterList{}, &LocalMachine{}, &LocalMachineList{}).AddToScheme

// Deep copies (what controller-gen would generate).

// DeepCopyInto copies in into out.
func (in *Initialization) DeepCopyInto(out *Initialization) {
	*out = *in
	if in.Provisioned != nil {
		v := *in.Provisioned
		out.Provisioned = &v
	}
}

func copyConditions(in []metav1.Condition) []metav1.Condition {
	if in == nil {
		return nil
	}
	out := make([]metav1.Condition, len(in))
	for i := range in {
		in[i].DeepCopyInto(&out[i])
	}
	return out
}

// DeepCopyInto copies in into out.
func (in *LocalCluster) DeepCopyInto(out *LocalCluster) {
	*out = *in
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	in.Status.Initialization.DeepCopyInto(&out.Status.Initialization)
	out.Status.Conditions = copyConditions(in.Status.Conditions)
}

// DeepCopyObject implements runtime.Object.
func (in *LocalCluster) DeepCopyObject() runtime.Object {
	out := new(LocalCluster)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *LocalClusterList) DeepCopyObject() runtime.Object {
	out := &LocalClusterList{TypeMeta: in.TypeMeta}
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]LocalCluster, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
	return out
}

// DeepCopyInto copies in into out.
func (in *LocalMachineStatus) DeepCopyInto(out *LocalMachineStatus) {
	*out = *in
	in.Initialization.DeepCopyInto(&out.Initialization)
	if in.Addresses != nil {
		out.Addresses = append([]clusterv1.MachineAddress(nil), in.Addresses...)
	}
	out.Conditions = copyConditions(in.Conditions)
}

// DeepCopyInto copies in into out.
func (in *LocalMachine) DeepCopyInto(out *LocalMachine) {
	*out = *in
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	in.Status.DeepCopyInto(&out.Status)
}

// DeepCopy returns a deep copy of in.
func (in *LocalMachine) DeepCopy() *LocalMachine {
	out := new(LocalMachine)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *LocalMachine) DeepCopyObject() runtime.Object {
	out := new(LocalMachine)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *LocalMachineList) DeepCopyObject() runtime.Object {
	out := &LocalMachineList{TypeMeta: in.TypeMeta}
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]LocalMachine, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
	return out
}
