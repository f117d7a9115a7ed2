package nodepoold

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/hostplane/hostplane/pkg/api"
)

// The fake clientset stands in for a guest apiserver here only to make a Node patch conflict
// on demand, which a real apiserver does only under a race.
func TestSyncNode_WhenThePatchConflicts_RereadsTheNodeAndRetries(t *testing.T) {
	tests := []struct {
		name      string
		conflicts int
		wantErr   bool
		wantGets  int
	}{
		{name: "no conflict", conflicts: 0, wantGets: 0},
		{name: "two conflicts", conflicts: 2, wantGets: 2},
		{name: "conflicts every time", conflicts: 100, wantErr: true, wantGets: 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}})
			patches, gets := 0, 0
			cs.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
				patches++
				if patches <= tt.conflicts {
					return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, "n1", nil)
				}
				return false, nil, nil
			})
			cs.PrependReactor("get", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
				gets++
				return false, nil, nil
			})
			np := &api.NodePool{Spec: api.NodePoolSpec{NodeLabels: map[string]string{"role": "web"}}}
			np.Name = "workers"
			node, err := cs.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			gets = 0
			err = syncNode(context.Background(), cs, node, np)
			if (err != nil) != tt.wantErr || (err != nil && !apierrors.IsConflict(err)) {
				t.Fatalf("err = %v, want error %v (a conflict)", err, tt.wantErr)
			}
			if gets != tt.wantGets {
				t.Errorf("node read %d times, want %d", gets, tt.wantGets)
			}
			if tt.wantErr {
				return
			}
			got, _ := cs.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
			if got.Labels["role"] != "web" || got.Labels[api.LabelNodePool] != "workers" {
				t.Errorf("labels = %v", got.Labels)
			}
		})
	}
}
