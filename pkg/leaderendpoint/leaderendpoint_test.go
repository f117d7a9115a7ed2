package leaderendpoint_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/hostplane/hostplane/pkg/leaderendpoint"
	"github.com/hostplane/hostplane/pkg/testenv"
)

// addresses lists the addresses of every endpoint of the Service's EndpointSlices: what a
// cluster DNS answers for a headless Service.
func addresses(t *testing.T, cs kubernetes.Interface, ns, svc string) []string {
	t.Helper()
	list, err := cs.DiscoveryV1().EndpointSlices(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=" + svc})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range list.Items {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && *e.Conditions.Ready {
				out = append(out, e.Addresses...)
			}
		}
	}
	slices.Sort(out)
	return out
}

func TestPublisher_TheServiceNamesTheLeaderAndFollowsATakeover(t *testing.T) {
	kube := testenv.KubeAPIServer(t)
	cs, err := kube.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	const ns, svc = "default", "infrad-endpoints"
	// The Service deploy/k8s declares: headless, no selector, no ports.
	if _, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: svc},
		Spec:       corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	start := func(addr string) context.CancelFunc {
		p, err := leaderendpoint.New(leaderendpoint.Config{Kubeconfig: kube.KubeconfigPath, Namespace: ns, Service: svc,
			Address: addr, Owner: "infrad", Interval: 200 * time.Millisecond, Log: slog.New(slog.NewTextHandler(t.Output(), nil))})
		if err != nil {
			t.Fatal(err)
		}
		pctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); _ = p.Start(pctx) }()
		t.Cleanup(func() { cancel(); <-done })
		return func() { cancel(); <-done }
	}
	want := func(addr, msg string) {
		t.Helper()
		testenv.Eventually(t, 30*time.Second, func() bool {
			return slices.Equal(addresses(t, cs, ns, svc), []string{addr})
		}, "%s: the Service's endpoints never became only %s", msg, addr)
	}

	stopFirst := start("10.88.0.11")
	want("10.88.0.11", "the first leader")

	// A takeover: the old leader stops, the new one writes the same slice with its address.
	stopFirst()
	start("10.88.1.7")
	want("10.88.1.7", "after the takeover")

	// A slice deleted by hand comes back at the leader's next write.
	if err := cs.DiscoveryV1().EndpointSlices(ns).Delete(ctx, leaderendpoint.SliceName(svc), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	want("10.88.1.7", "after the slice was deleted")
}

func TestNew_RefusesAConfigWithoutServiceAddressOrKubeconfig(t *testing.T) {
	const kc = "/etc/hostplane/management/kubeconfig"
	for name, cfg := range map[string]leaderendpoint.Config{
		"no service":     {Kubeconfig: kc, Namespace: "hostplane-system", Address: "10.0.0.1"},
		"no namespace":   {Kubeconfig: kc, Service: "infrad-endpoints", Address: "10.0.0.1"},
		"no address":     {Kubeconfig: kc, Namespace: "hostplane-system", Service: "infrad-endpoints"},
		"not an address": {Kubeconfig: kc, Namespace: "hostplane-system", Service: "infrad-endpoints", Address: "infrad-0"},
		"no kubeconfig":  {Namespace: "hostplane-system", Service: "infrad-endpoints", Address: "10.0.0.1"},
	} {
		if _, err := leaderendpoint.New(cfg); !errors.Is(err, leaderendpoint.ErrInvalidConfig) {
			t.Errorf("%s: New = %v, want ErrInvalidConfig", name, err)
		}
	}
}
