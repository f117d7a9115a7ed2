package api

import (
	"slices"
	"strings"
)

// InstanceType is one machine shape of the local platform: what a machine of that type
// reports as its Node's capacity (and allocatable), the architecture and zones it comes in,
// and what it would cost per hour (the local cloud bills nothing; prices exist so that
// cost-aware choices, such as Karpenter's, have something real to compare).
type InstanceType struct {
	Name string `json:"name"`
	// CPU is the number of cores; Memory a Kubernetes quantity ("8Gi"); MaxPods the pods
	// the node accepts.
	CPU     int32  `json:"cpu"`
	Memory  string `json:"memory"`
	MaxPods int32  `json:"maxPods"`
	// Architecture is the node's kubernetes.io/arch: amd64 or arm64.
	Architecture string `json:"architecture"`
	// Zones are the topology.kubernetes.io/zone values machines of this type are spread over.
	Zones []string `json:"zones"`
	// OnDemandPrice and SpotPrice are hourly prices in US dollars.
	OnDemandPrice float64 `json:"onDemandPrice"`
	SpotPrice     float64 `json:"spotPrice"`
}

// InstanceTypeList is the answer of GET /v1/platforms/local/instancetypes.
type InstanceTypeList struct {
	Items []InstanceType `json:"items"`
}

// Well-known node labels a machine's Node carries from its instance type (the kubelet sets
// them at registration, as a cloud kubelet does), and the capacity type of pool machines.
const (
	LabelInstanceType    = "node.kubernetes.io/instance-type"
	LabelZone            = "topology.kubernetes.io/zone"
	LabelArch            = "kubernetes.io/arch"
	LabelOS              = "kubernetes.io/os"
	LabelCapacityType    = "karpenter.sh/capacity-type"
	CapacityTypeOnDemand = "on-demand"
	CapacityTypeSpot     = "spot"
)

// DefaultInstanceType is the local platform's instance type when a pool names none:
// local.medium, the shape every local machine had before there were instance types
// (4 CPUs, 8Gi).
const DefaultInstanceType = "local.medium"

// The local platform's zones.
var localZones = []string{"local-a", "local-b", "local-c"}

// localInstanceTypes is the catalogue, cheapest first within an architecture.
var localInstanceTypes = []InstanceType{
	{Name: "local.small", CPU: 2, Memory: "4Gi", MaxPods: 30, Architecture: "amd64", Zones: localZones, OnDemandPrice: 0.05, SpotPrice: 0.015},
	{Name: "local.medium", CPU: 4, Memory: "8Gi", MaxPods: 58, Architecture: "amd64", Zones: localZones, OnDemandPrice: 0.10, SpotPrice: 0.03},
	{Name: "local.large", CPU: 8, Memory: "16Gi", MaxPods: 110, Architecture: "amd64", Zones: localZones, OnDemandPrice: 0.20, SpotPrice: 0.06},
	{Name: "local.xlarge", CPU: 16, Memory: "32Gi", MaxPods: 110, Architecture: "amd64", Zones: localZones, OnDemandPrice: 0.40, SpotPrice: 0.12},
	{Name: "local.arm.medium", CPU: 4, Memory: "8Gi", MaxPods: 58, Architecture: "arm64", Zones: localZones[:2], OnDemandPrice: 0.08, SpotPrice: 0.024},
}

// LocalInstanceTypes returns a copy of the local platform's catalogue.
func LocalInstanceTypes() []InstanceType {
	out := make([]InstanceType, len(localInstanceTypes))
	for i, t := range localInstanceTypes {
		t.Zones = slices.Clone(t.Zones)
		out[i] = t
	}
	return out
}

// LocalInstanceType returns the local instance type called name ("" is the default).
func LocalInstanceType(name string) (InstanceType, bool) {
	if name == "" {
		name = DefaultInstanceType
	}
	for _, t := range LocalInstanceTypes() {
		if t.Name == name {
			return t, true
		}
	}
	return InstanceType{}, false
}

// LocalInstanceTypeNames lists the catalogue's names, comma-separated, for error messages.
func LocalInstanceTypeNames() string {
	names := make([]string, len(localInstanceTypes))
	for i, t := range localInstanceTypes {
		names[i] = t.Name
	}
	return strings.Join(names, ", ")
}
