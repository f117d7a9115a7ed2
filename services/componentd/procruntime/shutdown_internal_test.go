package procruntime

import (
	"slices"
	"testing"
)

func TestShutdownBatches_StopDependentsBeforeKubeAPIServerAndEtcdLast(t *testing.T) {
	names := map[string]bool{}
	for _, n := range []string{
		"a-etcd-0", "a-etcd-1", "a-kube-apiserver-0", "a-kube-controller-manager-0", "a-kube-scheduler-0",
		"b-etcd-kube-apiserver-0", // cluster "b-etcd"
		"b-etcd-etcd-0", "a-karpenter-1", "stray",
	} {
		names[n] = true
	}
	got := shutdownBatches(names)
	pos := map[string]int{}
	for i, b := range got {
		for _, n := range b {
			pos[n] = i
		}
	}
	if len(pos) != len(names) {
		t.Fatalf("batches %v do not hold every name once", got)
	}
	for _, dependent := range []string{"a-kube-controller-manager-0", "a-kube-scheduler-0", "a-karpenter-1", "stray"} {
		if pos[dependent] >= pos["a-kube-apiserver-0"] {
			t.Errorf("%s stops with or after kube-apiserver: %v", dependent, got)
		}
	}
	for _, api := range []string{"a-kube-apiserver-0", "b-etcd-kube-apiserver-0"} {
		for _, etcd := range []string{"a-etcd-0", "a-etcd-1", "b-etcd-etcd-0"} {
			if pos[api] >= pos[etcd] {
				t.Errorf("%s stops with or after %s: %v", api, etcd, got)
			}
		}
	}
	if !slices.Equal(got[len(got)-1], []string{"a-etcd-0", "a-etcd-1", "b-etcd-etcd-0"}) {
		t.Errorf("last batch %v, want the etcd members", got[len(got)-1])
	}
}
