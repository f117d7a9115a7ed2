package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// LocalCluster is a cluster's Cluster API InfraCluster.
// +kubebuilder:object:generate=true
// +kubebuilder:object:root=true
type LocalCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              LocalClusterSpec   `json:"spec,omitzero"`
	Status            LocalClusterStatus `json:"status,omitzero"`
}

// LocalClusterSpec is where the cluster's API is.
// +kubebuilder:object:generate=true
type LocalClusterSpec struct {
	ControlPlaneEndpoint clusterv1.APIEndpoint `json:"controlPlaneEndpoint,omitzero"`
}

// LocalClusterStatus reports the cluster's infrastructure to Cluster API.
// +kubebuilder:object:generate=true
type LocalClusterStatus struct {
	Initialization Initialization     `json:"initialization,omitzero"`
	Conditions     []metav1.Condition `json:"conditions,omitempty"`
}

// LocalClusterList is a list of LocalClusters.
// +kubebuilder:object:generate=true
// +kubebuilder:object:root=true
type LocalClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LocalCluster `json:"items"`
}
