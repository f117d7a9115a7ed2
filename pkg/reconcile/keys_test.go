package reconcile_test

import (
	"context"
	"slices"
	"testing"

	"github.com/hostplane/hostplane/pkg/reconcile"
)

type keys []string

func (k keys) Keys(context.Context, ...string) ([]string, error) { return k, nil }

func TestClusterKeys_UnionOfClusterNamesAcrossBuckets(t *testing.T) {
	list := reconcile.ClusterKeys(keys{"a", "b"}, keys{"b.etcd", "b.kube-apiserver", "gone.etcd"})
	got, err := list(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a", "b", "gone"}; !slices.Equal(got, want) {
		t.Fatalf("ClusterKeys = %v, want %v", got, want)
	}
}
