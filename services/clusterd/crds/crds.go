// Package crds embeds the CustomResourceDefinitions clusterd installs in the management
// cluster: HostedControlPlane (controlplane.hostplane.dev/v1alpha1, labelled
// cluster.x-k8s.io/v1beta2: v1alpha1), the control-plane object of every Cluster API Cluster
// clusterd writes. Install them with crd.Install(ctx, cfg, crds.FS, owner).
package crds

import "embed"

//go:embed *.yaml
var FS embed.FS
