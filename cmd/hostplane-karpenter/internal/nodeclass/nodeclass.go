// Package nodeclass is Hostplane's Karpenter node class: the HostplaneNodeClass kind that a
// karpenter.sh/v1 NodePool's spec.template.spec.nodeClassRef names on the local platform, and
// the CRD that serves it in a guest cluster.
//
// The class has no settings yet: on the local platform every machine boots the same way, from
// ignitiond. Its status says Ready from the moment it exists (the CRD defaults it), because
// there is nothing for a class to wait on.
package nodeclass

import (
	"github.com/awslabs/operatorpkg/status"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
)

// Group, Version and Kind of the node class; DefaultName is the class Hostplane creates in
// every guest it runs Karpenter for (as HyperShift creates one).
const (
	Group       = "karpenter.hostplane.dev"
	Version     = "v1alpha1"
	Kind        = "HostplaneNodeClass"
	Plural      = "hostplanenodeclasses"
	DefaultName = "default"
)

// GroupVersion is the node class's API group and version.
var GroupVersion = schema.GroupVersion{Group: Group, Version: Version}

// HostplaneNodeClass is a cluster-scoped node class of the local platform.
type HostplaneNodeClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              Spec   `json:"spec,omitempty"`
	Status            Status `json:"status,omitempty"`
}

// Spec has no fields yet; it exists so that a class can grow settings without a new version.
type Spec struct{}

// Status carries the class's conditions (Ready).
type Status struct {
	Conditions []status.Condition `json:"conditions,omitempty"`
}

// HostplaneNodeClassList is a list of node classes.
type HostplaneNodeClassList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []HostplaneNodeClass `json:"items"`
}

// StatusConditions, GetConditions and SetConditions make the class a status.Object, which is
// what Karpenter's core asks of a node class.
func (in *HostplaneNodeClass) StatusConditions() status.ConditionSet {
	return status.NewReadyConditions().For(in)
}

// GetConditions returns the class's conditions.
func (in *HostplaneNodeClass) GetConditions() []status.Condition { return in.Status.Conditions }

// SetConditions replaces the class's conditions.
func (in *HostplaneNodeClass) SetConditions(c []status.Condition) { in.Status.Conditions = c }

// DeepCopyObject implements runtime.Object.
func (in *HostplaneNodeClass) DeepCopyObject() runtime.Object { return in.DeepCopy() }

// DeepCopy copies the class.
func (in *HostplaneNodeClass) DeepCopy() *HostplaneNodeClass {
	if in == nil {
		return nil
	}
	out := &HostplaneNodeClass{TypeMeta: in.TypeMeta, Spec: in.Spec}
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	for _, c := range in.Status.Conditions {
		c.LastTransitionTime = *c.LastTransitionTime.DeepCopy()
		out.Status.Conditions = append(out.Status.Conditions, c)
	}
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *HostplaneNodeClassList) DeepCopyObject() runtime.Object {
	if in == nil {
		return nil
	}
	out := &HostplaneNodeClassList{TypeMeta: in.TypeMeta}
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	for i := range in.Items {
		out.Items = append(out.Items, *in.Items[i].DeepCopy())
	}
	return out
}

// Karpenter's core reads and writes through client-go's global scheme, so the node class is
// registered there.
func init() {
	metav1.AddToGroupVersion(scheme.Scheme, GroupVersion)
	scheme.Scheme.AddKnownTypes(GroupVersion, &HostplaneNodeClass{}, &HostplaneNodeClassList{})
}

// Default is the class called DefaultName.
func Default() *HostplaneNodeClass {
	return &HostplaneNodeClass{
		TypeMeta:   metav1.TypeMeta{APIVersion: GroupVersion.String(), Kind: Kind},
		ObjectMeta: metav1.ObjectMeta{Name: DefaultName},
	}
}

// CRD serves HostplaneNodeClass. Its status defaults to Ready=True: the class has nothing to
// resolve before machines can use it.
func CRD() *apiextensionsv1.CustomResourceDefinition {
	str := apiextensionsv1.JSONSchemaProps{Type: "string"}
	condition := apiextensionsv1.JSONSchemaProps{
		Type:     "object",
		Required: []string{"type", "status", "lastTransitionTime", "reason", "message"},
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"type": str, "reason": str, "message": str,
			"status":             {Type: "string", Enum: []apiextensionsv1.JSON{{Raw: []byte(`"True"`)}, {Raw: []byte(`"False"`)}, {Raw: []byte(`"Unknown"`)}}},
			"lastTransitionTime": {Type: "string", Format: "date-time"},
			"observedGeneration": {Type: "integer", Format: "int64", Minimum: new(0.0)},
		},
	}
	return &apiextensionsv1.CustomResourceDefinition{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{Name: Plural + "." + Group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: Group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Kind: Kind, ListKind: Kind + "List", Plural: Plural, Singular: "hostplanenodeclass",
				ShortNames: []string{"hpnc"}, Categories: []string{"karpenter"},
			},
			Scope: apiextensionsv1.ClusterScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: Version, Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type:        "object",
					Description: "HostplaneNodeClass is the node class of Karpenter NodePools on Hostplane's local platform.",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"apiVersion": str, "kind": str,
						"metadata": {Type: "object"},
						"spec":     {Type: "object"},
						"status": {
							Type: "object",
							Default: &apiextensionsv1.JSON{Raw: []byte(
								`{"conditions":[{"type":"Ready","status":"True","reason":"Ready","message":"","lastTransitionTime":"2026-01-01T00:00:00Z"}]}`)},
							Properties: map[string]apiextensionsv1.JSONSchemaProps{
								"conditions": {Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &condition}},
							},
						},
					},
				}},
			}},
		},
	}
}
