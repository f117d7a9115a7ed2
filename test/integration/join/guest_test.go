package join_test

import (
	"testing"
	"time"

	"github.com/hostplane/hostplane/test/integration/stack"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/kube"
	"github.com/hostplane/hostplane/pkg/release"
	"github.com/hostplane/hostplane/pkg/testenv"
)

// guestUp bounds a guest control plane's start: generous, the machine is shared.
const guestUp = 5 * time.Minute

// guestCluster is a real guest control plane (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler) run by the real infrad, pkid and componentd over an embedded NATS.
type guestCluster struct {
	Name    string
	Release release.Release
	Admin   *kubernetes.Clientset
	REST    *rest.Config // admin
}

// startGuest starts a SingleReplica guest cluster of the latest release and returns its admin
// client once the apiserver answers. It skips without the release binaries (make k8s-bins).
func startGuest(t *testing.T, name string) *guestCluster {
	t.Helper()
	rel := release.Latest()
	testenv.RequireBinaries(t, rel, release.Components()...)
	st := stack.New(t, stack.Options{TailLines: 60})
	ctx := st.Ctx
	st.StartInfrad()
	st.StartPKID()
	st.StartComponentd()

	st.CreateCluster(stack.Cluster(name, rel.Version, api.SingleReplica))

	var kc []byte
	testenv.Eventually(t, guestUp, func() bool {
		kc = st.AdminKubeconfig(name)
		return kc != nil
	}, "cluster %s has an admin kubeconfig", name)
	var err error
	g := &guestCluster{Name: name, Release: rel}
	if g.REST, err = kube.RESTConfig(kc); err != nil {
		t.Fatal(err)
	}
	if g.Admin, err = kube.Clientset(kc); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, guestUp, func() bool {
		_, err := g.Admin.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil // the apiserver answers and kube-controller-manager runs
	}, "cluster %s serves and its controllers run", name)
	return g
}
