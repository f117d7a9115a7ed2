package nodepoold

import (
	"testing"
	"time"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/hostplane/hostplane/apis/infrastructure/v1alpha1"
	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/testenv"
)

// An autoscaled pool's MachineDeployment describes its nodes for scale from zero (the
// upstream capacity annotations, from the instance type), its machines carry the type to
// infrad through the LocalMachineTemplate, and a new type rolls them like any template change.
func TestNodePool_AutoscaledPoolDescribesItsInstanceTypeForScaleFromZero_AndANewTypeRolls(t *testing.T) {
	ce := startCAPI(t, "demo")
	np := ce.createPool("demo", poolBody("batch",
		`"autoScaling":{"min":0,"max":4},"release":{"version":"1.34.4"},"management":{"upgradeType":"Replace"}`,
		`"platform":{"type":"local","local":{"instanceType":"local.large"}}`,
		`"nodeLabels":{"tier":"gold"}`,
		`"taints":[{"key":"dedicated","value":"batch","effect":"NoSchedule"},{"key":"spot","effect":"PreferNoSchedule"}]`))
	ce.putIgnition("demo", "batch", np.Status.ConfigHash, "token-one")
	testenv.Eventually(t, time.Minute, func() bool { return ce.get("batch", &clusterv1.MachineDeployment{}) == nil }, "no MachineDeployment")

	md := ce.md("batch")
	want := map[string]string{
		clusterv1.AutoscalerMinSizeAnnotation: "0",
		clusterv1.AutoscalerMaxSizeAnnotation: "4",
		AnnotationCapacityCPU:                 "8",
		AnnotationCapacityMemory:              "16Gi",
		AnnotationCapacityMaxPods:             "110",
		AnnotationCapacityLabels: "hostplane.dev/nodepool=batch,karpenter.sh/capacity-type=on-demand,kubernetes.io/arch=amd64," +
			"kubernetes.io/os=linux,node.kubernetes.io/instance-type=local.large,tier=gold",
		AnnotationCapacityTaints: "dedicated=batch:NoSchedule,spot=:PreferNoSchedule",
	}
	for k, v := range want {
		if got := md.Annotations[k]; got != v {
			t.Errorf("MachineDeployment annotation %s = %q, want %q", k, got, v)
		}
	}
	if md.Spec.Replicas == nil || *md.Spec.Replicas != 0 {
		t.Errorf("replicas = %v, want min 0", md.Spec.Replicas)
	}
	if got := md.Spec.Template.Labels[api.LabelMachineInstanceType]; got != "local.large" {
		t.Errorf("machine template label %s = %q, want local.large", api.LabelMachineInstanceType, got)
	}
	lmtType := func() string {
		lmt := &infrav1.LocalMachineTemplate{}
		if err := ce.get("batch", lmt); err != nil {
			return ""
		}
		return lmt.Spec.Template.Spec.InstanceType
	}
	if got := lmtType(); got != "local.large" {
		t.Errorf("LocalMachineTemplate instanceType = %q, want local.large", got)
	}

	// A new instance type is a new config hash: once its userdata is ready, the template
	// (machines, LocalMachineTemplate, annotations) moves to the new type.
	small := ce.patchPool("demo", "batch", `{"spec":{"platform":{"local":{"instanceType":"local.small"}}}}`)
	if small.Status.ConfigHash == np.Status.ConfigHash {
		t.Fatal("a new instance type kept the config hash: machines would not roll")
	}
	ce.putIgnition("demo", "batch", small.Status.ConfigHash, "token-two")
	testenv.Eventually(t, time.Minute, func() bool {
		md := ce.md("batch")
		return *md.Spec.Template.Spec.Bootstrap.DataSecretName == api.UserDataSecretName("batch", small.Status.ConfigHash) &&
			md.Spec.Template.Labels[api.LabelMachineInstanceType] == "local.small" && lmtType() == "local.small"
	}, "the MachineDeployment and LocalMachineTemplate never moved to local.small")
	md = ce.md("batch")
	if md.Annotations[AnnotationCapacityCPU] != "2" || md.Annotations[AnnotationCapacityMemory] != "4Gi" || md.Annotations[AnnotationCapacityMaxPods] != "30" {
		t.Errorf("annotations after the type change: %v", md.Annotations)
	}

	// A fixed-size pool has no autoscaler annotations at all.
	fixed := ce.createPool("demo", poolBody("fixed", `"replicas":0,"release":{"version":"1.34.4"},"management":{"upgradeType":"Replace"}`))
	ce.putIgnition("demo", "fixed", fixed.Status.ConfigHash, "token-three")
	testenv.Eventually(t, time.Minute, func() bool { return ce.get("fixed", &clusterv1.MachineDeployment{}) == nil }, "no MachineDeployment")
	for k := range ce.md("fixed").Annotations {
		if k == AnnotationCapacityCPU || k == clusterv1.AutoscalerMaxSizeAnnotation {
			t.Errorf("a fixed-size pool's MachineDeployment has %s", k)
		}
	}
}
