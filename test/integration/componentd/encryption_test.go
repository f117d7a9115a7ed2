package componentd_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/certs"
	"github.com/hostplane/hostplane/pkg/testenv"
	"github.com/hostplane/hostplane/services/pkid"
	"github.com/hostplane/hostplane/test/integration/stack"
)

// TestComponentd_GuestSecrets_AreStoredEncryptedInEtcdAndReadableThroughTheAPI creates a
// Secret in a guest cluster and reads what kube-apiserver stored in the guest's etcd.
func TestComponentd_GuestSecrets_AreStoredEncryptedInEtcdAndReadableThroughTheAPI(t *testing.T) {
	h := newHarnessFor(t, "1.34.4")
	h.StartInfrad()
	h.StartPKID()
	cd := h.startComponentd()

	c := stack.Cluster("vault", "1.34.4", api.SingleReplica)
	c.Spec.Default() // as clusterd stores it: secretEncryption {type: aescbc}
	h.CreateCluster(c)
	h.waitSettled("vault", "1.34.4")

	p, _, err := h.pki.Get(h.Ctx, "vault")
	if err != nil {
		t.Fatal(err)
	}
	if p.SecretEncryption == nil || len(p.SecretEncryption.Keys) != 1 {
		t.Fatalf("pki secret encryption = %+v, want one key", p.SecretEncryption)
	}
	keyName := p.SecretEncryption.Keys[0].Name

	// The configuration kube-apiserver reads holds the key: only its owner may read it.
	cfgPath := filepath.Join(cd.d.ClusterDir("vault"), "pki", "encryption-config.yaml")
	fi, err := os.Stat(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v, want 0600", cfgPath, fi.Mode().Perm())
	}

	plaintext := "correct-horse-battery-staple-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	cs := h.AdminClientset("vault")
	var created *corev1.Secret
	testenv.Eventually(t, wait, func() bool {
		created, err = cs.CoreV1().Secrets("default").Create(h.Ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "db-password"},
			StringData: map[string]string{"password": plaintext},
		}, metav1.CreateOptions{})
		return err == nil
	}, "creating a Secret in the guest cluster")

	raw := h.etcdGet("vault", "/registry/secrets/default/db-password")
	prefix := "k8s:enc:aescbc:v1:" + keyName + ":"
	if !bytes.HasPrefix(raw, []byte(prefix)) {
		t.Errorf("etcd holds %q…, want a value beginning with %q", raw[:min(len(raw), 40)], prefix)
	}
	if bytes.Contains(raw, []byte(plaintext)) || bytes.Contains(raw, []byte("db-password")) {
		t.Error("etcd holds the Secret in plaintext")
	}
	h.readSecret(cs, "default", "db-password", plaintext)

	// A ConfigMap is not encrypted: the configuration names Secrets only.
	if _, err := cs.CoreV1().ConfigMaps("default").Create(h.Ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"colour": plaintext},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if raw := h.etcdGet("vault", "/registry/configmaps/default/settings"); !bytes.Contains(raw, []byte(plaintext)) {
		t.Errorf("the ConfigMap is not stored as written: %q…", raw[:min(len(raw), 40)])
	}

	// A componentd restart keeps the same key and control plane: the Secret still reads.
	cd.stop()
	cd = h.startComponentd()
	testenv.Eventually(t, wait, func() bool {
		v, ok := testenv.Metric(t, cd.reg, "hostplane_component_available",
			map[string]string{"cluster": "vault", "component": api.ComponentKubeAPIServer})
		return ok && v == 1
	}, "the restarted componentd reports kube-apiserver Available")
	h.readSecret(cs, "default", "db-password", plaintext)
	if got, _, err := h.pki.Get(h.Ctx, "vault"); err != nil || got.SecretEncryption.Keys[0].Name != keyName {
		t.Errorf("after the restart the key is %+v (%v), want %s", got.SecretEncryption, err, keyName)
	}
	if created.Name != "db-password" {
		t.Errorf("created %q", created.Name)
	}
}

// readSecret reads a Secret through the guest API and checks its password.
func (h *harness) readSecret(cs *kubernetes.Clientset, ns, name, want string) {
	h.T.Helper()
	var got *corev1.Secret
	var err error
	testenv.Eventually(h.T, wait, func() bool {
		got, err = cs.CoreV1().Secrets(ns).Get(h.Ctx, name, metav1.GetOptions{})
		return err == nil
	}, "reading Secret %s/%s through the guest API", ns, name)
	if string(got.Data["password"]) != want {
		h.T.Errorf("Secret %s/%s reads %q through the API, want %q", ns, name, got.Data["password"], want)
	}
}

// etcdGet reads key straight from the cluster's etcd, as kube-apiserver's etcd client: its
// address from the infra record, the client certificate and etcd CA from the PKI record.
func (h *harness) etcdGet(cluster, key string) []byte {
	h.T.Helper()
	inf, _, err := stack.Bucket[api.Infra](h.Env, bus.BucketInfra).Get(h.Ctx, cluster)
	if err != nil {
		h.T.Fatal(err)
	}
	p, _, err := h.pki.Get(h.Ctx, cluster)
	if err != nil {
		h.T.Fatal(err)
	}
	seal, err := certs.LoadOrCreateSealKey(filepath.Join(h.DataDir, pkid.SealKeyFileName))
	if err != nil {
		h.T.Fatal(err)
	}
	client := p.Certs[api.CertAPIServerEtcdClient]
	keyPEM, err := seal.Open(client.SealedKey)
	if err != nil {
		h.T.Fatal(err)
	}
	pair, err := tls.X509KeyPair(client.CertPEM, keyPEM)
	if err != nil {
		h.T.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(p.Certs[api.CertEtcdCA].CertPEM) {
		h.T.Fatal("no etcd CA certificate")
	}
	var endpoints []string
	for _, m := range inf.Etcd {
		host := m.Host
		if host == "" {
			host = "127.0.0.1"
		}
		endpoints = append(endpoints, fmt.Sprintf("https://%s:%d", host, m.ClientPort))
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 10 * time.Second,
		TLS:         &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: roots, MinVersion: tls.VersionTLS12},
	})
	if err != nil {
		h.T.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(h.Ctx, wait)
	defer cancel()
	resp, err := cli.Get(ctx, key)
	if err != nil {
		h.T.Fatalf("etcd get %s: %v", key, err)
	}
	if len(resp.Kvs) != 1 {
		h.T.Fatalf("etcd has %d values under %s", len(resp.Kvs), key)
	}
	return resp.Kvs[0].Value
}

// TestComponentd_SecretEncryptionKeyRotation_ReencryptsEverySecretWithTheNewKey rotates a
// guest's Secret encryption key with POST /v1/clusters/{cluster}/pki/rotate and reads etcd.
// While it runs, the Secrets are read through the API: with two kube-apiserver replicas no
// read may meet a value its replica cannot decrypt.
func TestComponentd_SecretEncryptionKeyRotation_ReencryptsEverySecretWithTheNewKey(t *testing.T) {
	for _, policy := range []string{api.SingleReplica, api.HighlyAvailable} {
		t.Run(policy, func(t *testing.T) { rotateSecretEncryptionKey(t, policy) })
	}
}

func rotateSecretEncryptionKey(t *testing.T, policy string) {
	h := newHarnessFor(t, "1.34.4")
	h.StartInfrad()
	pkidURL := h.StartPKID()
	h.startComponentd()

	c := stack.Cluster("rekey", "1.34.4", policy)
	c.Spec.Default()
	h.CreateCluster(c)
	h.waitSettled("rekey", "1.34.4")
	first, _, err := h.pki.Get(h.Ctx, "rekey")
	if err != nil {
		t.Fatal(err)
	}
	oldKey := first.SecretEncryption.Keys[0].Name

	cs := h.AdminClientset("rekey")
	names := []string{"alpha", "beta", "gamma"}
	for _, n := range names {
		testenv.Eventually(t, wait, func() bool {
			_, err := cs.CoreV1().Secrets("default").Create(h.Ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: n}, StringData: map[string]string{"password": "pw-" + n},
			}, metav1.CreateOptions{})
			return err == nil
		}, "creating Secret %s", n)
		if raw := h.etcdGet("rekey", "/registry/secrets/default/"+n); !bytes.HasPrefix(raw, []byte("k8s:enc:aescbc:v1:"+oldKey+":")) {
			t.Fatalf("Secret %s is not encrypted with %s before the rotation: %q", n, oldKey, raw[:min(len(raw), 40)])
		}
	}

	code, _, body := post(t, pkidURL+"/v1/clusters/rekey/pki/rotate")
	var st api.PKIStatus
	if err := json.Unmarshal(body, &st); code != http.StatusAccepted || err != nil {
		t.Fatalf("POST rotate: %d %s", code, body)
	}
	if st.SecretEncryption == nil || st.SecretEncryption.Rotation == nil || st.SecretEncryption.Rotation.Phase != api.RotationRequested {
		t.Fatalf("the answer does not show the key rotation requested: %s", body)
	}

	var done *api.ClusterPKI
	phases := map[string]bool{}
	reads, failed := 0, 0
	deadline := time.Now().Add(upTimeout)
	for done == nil {
		p, _, err := h.pki.Get(h.Ctx, "rekey")
		if err != nil {
			t.Fatal(err)
		}
		if r := p.SecretEncryption.Rotation; r != nil {
			phases[r.Phase] = true
		} else if len(p.SecretEncryption.Keys) == 1 && p.SecretEncryption.Keys[0].Name != oldKey {
			done = p
		}
		if time.Now().After(deadline) {
			t.Fatalf("key rotation not done within %v: %+v", upTimeout, p.SecretEncryption)
		}
		// A replica being replaced may refuse a connection; one that cannot decrypt a
		// value answers "unable to transform key": that must never happen.
		for _, n := range names {
			_, err := cs.CoreV1().Secrets("default").Get(h.Ctx, n, metav1.GetOptions{})
			reads++
			if err != nil {
				failed++
				if strings.Contains(err.Error(), "transform") || strings.Contains(err.Error(), "decrypt") {
					t.Errorf("reading Secret %s during the rotation: %v", n, err)
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	newKey := done.SecretEncryption.Keys[0].Name
	t.Logf("rotated %s → %s through phases %v; %d of %d reads during it failed (none for a key)", oldKey, newKey, phases, failed, reads)
	h.waitSettled("rekey", "1.34.4")

	for _, n := range names {
		raw := h.etcdGet("rekey", "/registry/secrets/default/"+n)
		if !bytes.HasPrefix(raw, []byte("k8s:enc:aescbc:v1:"+newKey+":")) {
			t.Errorf("Secret %s after the rotation: %q…, want it encrypted with %s", n, raw[:min(len(raw), 40)], newKey)
		}
		h.readSecret(cs, "default", n, "pw-"+n)
	}
}
