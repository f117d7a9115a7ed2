package testenv_test

import (
	"context"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hostplane/hostplane/pkg/testenv"
)

func TestKubeAPIServer_ServesTheSystemNamespaces(t *testing.T) {
	c := testenv.KubeAPIServer(t)
	cs, err := c.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	want := []string{"default", "kube-public", "kube-system"}
	var names []string
	// The system namespaces are created by kube-apiserver's own controllers; /readyz waits
	// for them, but poll anyway rather than rely on it.
	for {
		list, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err == nil {
			names = names[:0]
			for _, ns := range list.Items {
				names = append(names, ns.Name)
			}
			if containsAll(names, want) {
				break
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("namespaces = %v (last error %v), want %v among them", names, err, want)
		case <-time.After(200 * time.Millisecond):
		}
	}
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v.GitVersion != "v"+c.Release.Version {
		t.Errorf("server version = %s, want v%s", v.GitVersion, c.Release.Version)
	}
}

func containsAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}
