// Package capi embeds the CustomResourceDefinitions of Cluster API v1.12's core kinds that
// hostplane runs (Cluster, ClusterClass, Machine, MachineSet, MachineDeployment,
// MachineHealthCheck, MachineDrainRule), copied from sigs.k8s.io/cluster-api's
// config/crd/bases. Install them with crd.Install(ctx, cfg, capi.CRDs, owner).
//
// MachinePool's CRD is here too although hostplane uses no MachinePool (nodepoold turns the
// feature off): Cluster API's own tools expect it, as every Cluster API install has it —
// `clusterctl describe cluster` lists a cluster's MachinePools and fails without the kind.
package capi

import (
	"embed"
	"io/fs"
)

//go:embed bases/*.yaml
var bases embed.FS

// CRDs holds the CRD files at its root.
var CRDs, _ = fs.Sub(bases, "bases")
