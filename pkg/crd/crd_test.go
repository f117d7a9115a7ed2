package crd_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/hostplane/hostplane/pkg/crd"
	"github.com/hostplane/hostplane/pkg/crd/capi"
	"github.com/hostplane/hostplane/pkg/testenv"
)

func TestLoad_EveryEmbeddedClusterAPIFileIsACRD(t *testing.T) {
	crds, err := crd.Load(capi.CRDs)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"clusters.cluster.x-k8s.io": false, "machines.cluster.x-k8s.io": false,
		"machinesets.cluster.x-k8s.io": false, "machinedeployments.cluster.x-k8s.io": false,
		"machinehealthchecks.cluster.x-k8s.io": false, "machinedrainrules.cluster.x-k8s.io": false,
		"machinepools.cluster.x-k8s.io": false}
	for _, c := range crds {
		if _, ok := want[c.Name]; ok {
			want[c.Name] = true
		}
	}
	for name, found := range want {
		if !found {
			t.Errorf("%s is not embedded", name)
		}
	}
}

func TestInstall_ClusterAPIKindsAreServedAndASecondInstallIsANoOp(t *testing.T) {
	mgmt := testenv.KubeAPIServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for range 2 {
		if err := crd.Install(ctx, mgmt.RESTConfig, capi.CRDs, "test"); err != nil {
			t.Fatal(err)
		}
	}
	dyn, err := dynamic.NewForConfig(mgmt.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	gvr := schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "machinedeployments"}
	list, err := dyn.Resource(gvr).Namespace("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list MachineDeployments after install: %v", err)
	}
	var _ *unstructured.UnstructuredList = list
}
