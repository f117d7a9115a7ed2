package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// LocalMachineTemplate is the template of a NodePool's LocalMachines: Cluster API's
// InfraMachineTemplate (contract v1beta2), which copies spec.template into each LocalMachine
// it creates. nodepoold writes one per pool; infrad never reads it. The CRD's status is an
// empty object (no fields), so the type has no Status.
// +kubebuilder:object:generate=true
// +kubebuilder:object:root=true
type LocalMachineTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              LocalMachineTemplateSpec `json:"spec"`
}

// LocalMachineTemplateSpec holds the template.
// +kubebuilder:object:generate=true
type LocalMachineTemplateSpec struct {
	Template LocalMachineTemplateResource `json:"template"`
}

// LocalMachineTemplateResource is what each LocalMachine gets: its labels and annotations
// (metadata, left out when empty: the CRD wants at least one of them) and its spec.
// +kubebuilder:object:generate=true
type LocalMachineTemplateResource struct {
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitzero"`
	Spec       LocalMachineSpec     `json:"spec"`
}

// LocalMachineTemplateList is a list of LocalMachineTemplates.
// +kubebuilder:object:generate=true
// +kubebuilder:object:root=true
type LocalMachineTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LocalMachineTemplate `json:"items"`
}
