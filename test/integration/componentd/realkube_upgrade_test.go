package componentd_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/certs"
	"github.com/hostplane/hostplane/pkg/release"
	"github.com/hostplane/hostplane/services/componentd/kuberuntime"
)

// maxRollOutage bounds the longest run of failed samples of the availability probe through a
// rolling update. With 2 kube-apiserver replicas rolled one surge pod at a time (maxSurge 1,
// maxUnavailable 0) and a client trying every ready endpoint, some kube-apiserver always
// answers. A sample whose endpoints all failed fast (a pod that has just stopped listening
// still named ready for a moment) stays under it; an endpoint silent for the client's 3 s
// timeout, or a few seconds of failures, do not.
const maxRollOutage = 2 * time.Second

// A HighlyAvailable control plane on three real management nodes is upgraded from the
// catalogue's previous release to the newest, then kube-apiserver's serving certificate is
// renewed, while a client of the guest API (through the kube-apiserver Service's ready
// endpoints, as a load balancer with health checks would) watches:
//
//   - the upgrade rolls kube-apiserver, kube-controller-manager and kube-scheduler onto the
//     new release's images, each Deployment one surge pod at a time; etcd keeps its pods and
//     its image (the runtime pins a running etcd's image: package kuberuntime); every new
//     kube-apiserver answers /version with the new release;
//   - pkid renews the serving certificate, and only it (it reissues a leaf its record lacks,
//     as one whose SANs stop covering the infra: the test drops it from the record; a
//     componentd pass that meets the record without it fails and is retried, the pods
//     untouched), and only the pods mounting it, kube-apiserver's, roll; each new one serves
//     the new certificate;
//   - through both the guest API never fails for maxRollOutage, and a ConfigMap written
//     before the upgrade is still there at the end.
//
// The times logged (create → settled, the upgrade, the rotation, the longest failure of the
// guest API in each) are the figures in BENCHMARKS.md.
func TestComponentd_KubernetesRuntime_OnRealKubelets_HighlyAvailableUpgradeAndRotationKeepTheAPIUp(t *testing.T) {
	from, to := previousRelease(t), release.Latest()
	mc := realManagementCluster(t, from)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const name = "roll"
	h, cs := newRealKubeHarness(t, mc, name, from.Version, to.Version)
	ns := kuberuntime.Namespace(name)

	created := time.Now()
	h.createCluster(name, from.Version, api.HighlyAvailable)
	h.waitSettled(name, from.Version)
	t.Logf("HighlyAvailable control plane at %s settled (every component Available and every replica Ready from the pods) %s after create",
		from.Version, time.Since(created).Round(time.Millisecond))
	guest := newGuestAPI(t, h, cs, name)
	const kept = "written-before-the-upgrade"
	guest.waitFor(ctx, t, "the guest API to store a ConfigMap", func(ctx context.Context, g kubernetes.Interface) error {
		return putConfigMap(ctx, g, kept)
	})

	// The upgrade: the Kubernetes components roll onto the new images, etcd stays.
	before := mustControlPlanePods(ctx, t, cs, ns)
	probe := startAvailabilityProbe(ctx, h, guest, name)
	began := time.Now()
	h.upgrade(name, to.Version)
	kubernetesComponents := []string{api.ComponentKubeAPIServer, api.ComponentControllerManager, api.ComponentScheduler}
	waitRolled(ctx, t, h, cs, name, to.Version, before, kubernetesComponents, func(p *corev1.Pod) string {
		comp := p.Labels[kuberuntime.LabelComponent]
		if img := p.Spec.Containers[0].Image; img != to.Images[comp] {
			return "image " + img
		}
		if comp != api.ComponentKubeAPIServer {
			return ""
		}
		c, err := guest.client(p.Status.PodIP)
		if err != nil {
			return err.Error()
		}
		v, err := c.Discovery().ServerVersion()
		switch {
		case err != nil:
			return "/version: " + err.Error()
		case v.GitVersion != "v"+to.Version:
			return "/version " + v.GitVersion
		}
		return ""
	})
	upgraded, seen := time.Since(began), probe.stop()
	t.Logf("upgraded %s → %s in %s: kube-apiserver, kube-controller-manager and kube-scheduler on new Ready pods of the new images, every kube-apiserver answering /version v%s, etcd's 3 pods kept (image %s)",
		from.Version, to.Version, upgraded.Round(time.Millisecond), to.Version, before[api.ComponentEtcd][0].Spec.Containers[0].Image)
	t.Logf("during the upgrade: %s", seen)
	checkRollAvailability(t, "the upgrade", seen)

	// The rotation: pkid renews kube-apiserver's serving certificate; only its pods roll.
	before = mustControlPlanePods(ctx, t, cs, ns)
	old, _, err := h.pki.Get(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	probe = startAvailabilityProbe(ctx, h, guest, name)
	began = time.Now()
	if _, _, err := h.pki.Mutate(ctx, name, false, func(p *api.ClusterPKI) error {
		delete(p.Certs, api.CertAPIServer)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	h.PublishCluster(name, "updated") // wakes pkid
	var renewed *api.ClusterPKI
	waitUntil(ctx, t, "pkid to renew kube-apiserver's serving certificate", func(ctx context.Context) (bool, string, error) {
		p, _, err := h.pki.Get(ctx, name)
		if err != nil {
			return false, err.Error(), nil
		}
		if p.Serial == old.Serial || len(p.Certs[api.CertAPIServer].CertPEM) == 0 {
			return false, "serial " + p.Serial, nil
		}
		renewed = p
		return true, "", nil
	})
	for n, cb := range old.Certs {
		if changed := !bytes.Equal(cb.CertPEM, renewed.Certs[n].CertPEM); changed != (n == api.CertAPIServer) {
			t.Errorf("certificate %s changed = %v by the renewal, want %v", n, changed, n == api.CertAPIServer)
		}
	}
	cert, err := certs.ParseCertificate(renewed.Certs[api.CertAPIServer].CertPEM)
	if err != nil {
		t.Fatal(err)
	}
	waitRolled(ctx, t, h, cs, name, to.Version, before, []string{api.ComponentKubeAPIServer}, func(p *corev1.Pod) string {
		served, err := guest.servingCertificate(ctx, p.Status.PodIP)
		switch {
		case err != nil:
			return err.Error()
		case !served.Equal(cert):
			return "serves the certificate with serial " + served.SerialNumber.String()
		}
		return ""
	})
	rotated, seen := time.Since(began), probe.stop()
	t.Logf("kube-apiserver's serving certificate renewed (PKI serial %s → %s) and served by 2 new Ready kube-apiserver pods %s after the renewal was asked for; etcd, kube-controller-manager and kube-scheduler kept their pods",
		old.Serial, renewed.Serial, rotated.Round(time.Millisecond))
	t.Logf("during the rotation: %s", seen)
	checkRollAvailability(t, "the rotation", seen)

	if _, err := guest.do(ctx, func(ctx context.Context, g kubernetes.Interface) error {
		_, err := g.CoreV1().ConfigMaps(metav1.NamespaceDefault).Get(ctx, kept, metav1.GetOptions{})
		return err
	}); err != nil {
		t.Errorf("the ConfigMap written before the upgrade: %v", err)
	}
}

// previousRelease is the catalogue's release before the newest: the one an upgrade to the
// newest starts from.
func previousRelease(t *testing.T) release.Release {
	t.Helper()
	vs := release.Versions()
	if len(vs) < 2 {
		t.Fatalf("the release catalogue holds only %v: no release to upgrade from", vs)
	}
	rel, err := release.Lookup(vs[len(vs)-2])
	if err != nil {
		t.Fatal(err)
	}
	if err := release.CheckUpgrade(rel.Version, release.Latest().Version); err != nil {
		t.Fatal(err)
	}
	return rel
}

func mustControlPlanePods(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns string) map[string][]corev1.Pod {
	t.Helper()
	pods, err := controlPlanePods(ctx, cs, ns)
	if err != nil {
		t.Fatal(err)
	}
	return pods
}

// waitRolled waits until componentd records cluster settled at version and each component
// of rolled runs as many Ready pods as before, none of before's, each one accepted by check
// (which says what is still wrong with it, "" for nothing). A component not in rolled must
// keep exactly its pods of before: the test fails at once if it does not.
func waitRolled(ctx context.Context, t *testing.T, h *harness, cs kubernetes.Interface, cluster, version string,
	before map[string][]corev1.Pod, rolled []string, check func(*corev1.Pod) string) {
	t.Helper()
	waitUntil(ctx, t, fmt.Sprintf("%v to roll at %s", rolled, version), func(ctx context.Context) (bool, string, error) {
		now, err := controlPlanePods(ctx, cs, kuberuntime.Namespace(cluster))
		if err != nil {
			return false, err.Error(), nil
		}
		var notYet []string
		for _, comp := range componentNames {
			old := uids(before[comp])
			if !slices.Contains(rolled, comp) {
				if got := uids(now[comp]); !slices.Equal(got, old) {
					return false, "", fmt.Errorf("%s rolled too: pods %v, before %v", comp, got, old)
				}
				continue
			}
			done := 0
			for _, p := range now[comp] {
				switch {
				case slices.Contains(old, p.UID):
					notYet = append(notYet, p.Name+" still runs")
				case !podReady(&p):
					notYet = append(notYet, p.Name+" not Ready")
				default:
					if why := check(&p); why != "" {
						notYet = append(notYet, p.Name+": "+why)
					} else {
						done++
					}
				}
			}
			if done != len(old) {
				notYet = append(notYet, fmt.Sprintf("%s: %d of %d pods rolled", comp, done, len(old)))
			}
		}
		if !settled(h.componentsOf(cluster), version) {
			notYet = append(notYet, "componentd's records not settled at "+version)
		}
		return len(notYet) == 0, strings.Join(notYet, "; "), nil
	})
}

// uids returns the pods' UIDs, sorted.
func uids(pods []corev1.Pod) []types.UID {
	out := make([]types.UID, 0, len(pods))
	for _, p := range pods {
		out = append(out, p.UID)
	}
	slices.Sort(out)
	return out
}

// checkRollAvailability fails the test if the guest API failed for maxRollOutage or more
// during a rolling update.
func checkRollAvailability(t *testing.T, during string, a availability) {
	t.Helper()
	if a.apiLongest >= maxRollOutage {
		t.Errorf("during %s the guest API failed for %s (%d failed samples; %s), want under %s with 2 kube-apiserver replicas rolled one at a time",
			during, a.apiLongest.Round(time.Millisecond), a.apiFailures, a.lastAPIError, maxRollOutage)
	}
}

// servingCertificate returns the certificate the kube-apiserver at addr serves, verified as
// the guest API's clients verify it.
func (g *guestAPI) servingCertificate(ctx context.Context, addr string) (*x509.Certificate, error) {
	cfg, err := rest.TLSConfigFor(g.base)
	if err != nil {
		return nil, err
	}
	dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	conn, err := (&tls.Dialer{Config: cfg}).DialContext(dctx, "tcp", net.JoinHostPort(addr, strconv.Itoa(kuberuntime.APIServerPort)))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.(*tls.Conn).ConnectionState().PeerCertificates[0], nil
}
