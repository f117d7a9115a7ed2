package pkid

import (
	"bytes"
	"net"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/certs"
)

var defaultLife = lifetimes{CA: DefaultCALifetime, Leaf: DefaultLeafLifetime}

func TestLifetimesOf_FallsBackToDefaultsForBadValues(t *testing.T) {
	tests := []struct {
		name     string
		spec     *api.PKISpec
		want     lifetimes
		problems int
	}{
		{"no spec", nil, defaultLife, 0},
		{"empty", &api.PKISpec{}, defaultLife, 0},
		{"both set", &api.PKISpec{CALifetime: "48h", LeafLifetime: "90m"}, lifetimes{48 * time.Hour, 90 * time.Minute}, 0},
		{"unparsable CA", &api.PKISpec{CALifetime: "10y", LeafLifetime: "1h"}, lifetimes{DefaultCALifetime, time.Hour}, 1},
		{"negative leaf", &api.PKISpec{LeafLifetime: "-1h"}, defaultLife, 1},
		{"zero both", &api.PKISpec{CALifetime: "0s", LeafLifetime: "0"}, defaultLife, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, problems := lifetimesOf(tt.spec, defaultLife)
			if got != tt.want || len(problems) != tt.problems {
				t.Fatalf("got %+v with problems %q; want %+v with %d problems", got, problems, tt.want, tt.problems)
			}
		})
	}
}

func TestRenewAt(t *testing.T) {
	issued := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	backdated := issued.Add(-time.Minute)
	farCA := issued.Add(100 * 24 * time.Hour)
	tests := []struct {
		name              string
		notAfter, caAfter time.Time
		leaf              time.Duration
		want              time.Time
		ok                bool
	}{
		{"two thirds of a 3s leaf despite the backdated NotBefore", issued.Add(3 * time.Second), farCA, 3 * time.Second, issued.Add(2 * time.Second), true},
		{"two thirds of 30 days", issued.Add(30 * 24 * time.Hour), farCA, 30 * 24 * time.Hour, issued.Add(20 * 24 * time.Hour), true},
		{"a leaf shorter than configured uses its own span", issued.Add(time.Hour - time.Minute), farCA, 24 * time.Hour, backdated.Add(40 * time.Minute), true},
		{"capped at the CA: never", farCA, farCA, 365 * 24 * time.Hour, time.Time{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := renewAt(backdated, tt.notAfter, tt.caAfter, tt.leaf, DefaultRenewFraction)
			if ok != tt.ok || got.Sub(tt.want).Abs() > time.Millisecond {
				t.Fatalf("renewAt = %v, %v; want %v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestLeafSpecs_ServingSANsCoverEveryHost(t *testing.T) {
	c := &api.Cluster{ObjectMeta: api.ObjectMeta{Name: "demo"}, Spec: api.ClusterSpec{Networking: api.Networking{ServiceCIDR: "bogus"}}}
	inf := &api.Infra{
		Endpoint:   api.Endpoint{Host: "API.Example.com", Port: 443},
		APIServers: []api.Endpoint{{Host: "127.0.0.1", Port: 1}, {Host: "10.0.0.2", Port: 2}},
		Etcd:       []api.EtcdMember{{Host: "10.0.0.3"}, {Host: "etcd-1.local"}},
	}
	leaves, problems, err := leafSpecs(c, inf)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 1 {
		t.Errorf("problems = %q, want one about the service CIDR", problems)
	}
	byName := map[string]leafSpec{}
	for _, l := range leaves {
		byName[l.Name] = l
	}
	as := byName[api.CertAPIServer].Req
	for _, d := range []string{"api.example.com", "localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local",
		// componentd's kubernetes runtime: the kube-apiserver Service.
		"kube-apiserver.hostplane-demo.svc", "kube-apiserver.hostplane-demo.svc.cluster.local"} {
		if !slices.Contains(as.DNSNames, d) {
			t.Errorf("apiserver DNS SANs %v lack %s", as.DNSNames, d)
		}
	}
	for _, ip := range []string{"127.0.0.1", "10.0.0.2", "10.96.0.1"} {
		if !slices.ContainsFunc(as.IPs, net.ParseIP(ip).Equal) {
			t.Errorf("apiserver IP SANs %v lack %s", as.IPs, ip)
		}
	}
	if n := len(as.IPs); n != 3 {
		t.Errorf("apiserver IP SANs %v have duplicates", as.IPs)
	}
	for _, name := range []string{api.CertEtcdServer, api.CertEtcdPeer} {
		r := byName[name].Req
		if !slices.Contains(r.DNSNames, "etcd-1.local") || !slices.Contains(r.DNSNames, "localhost") ||
			!slices.ContainsFunc(r.IPs, net.ParseIP("10.0.0.3").Equal) || !slices.ContainsFunc(r.IPs, net.ParseIP("127.0.0.1").Equal) {
			t.Errorf("%s SANs %v %v", name, r.DNSNames, r.IPs)
		}
		// componentd's kubernetes runtime: every member of the etcd StatefulSet.
		for _, d := range []string{"*.etcd-discovery.hostplane-demo.svc", "etcd-discovery.hostplane-demo.svc"} {
			if !slices.Contains(r.DNSNames, d) {
				t.Errorf("%s DNS SANs %v lack %s", name, r.DNSNames, d)
			}
		}
	}
	if _, _, err := leafSpecs(c, &api.Infra{}); err == nil {
		t.Error("an infra without an endpoint gave leaf specs")
	}
}

func TestPlan_ReissuesOnlyWhatChanged(t *testing.T) {
	seal, err := certs.LoadOrCreateSealKey(filepath.Join(t.TempDir(), "k"))
	if err != nil {
		t.Fatal(err)
	}
	b := &bundler{seal: seal, fraction: DefaultRenewFraction}
	c := &api.Cluster{}
	inf := &api.Infra{Endpoint: api.Endpoint{Host: "10.1.1.1", Port: 6443}, Etcd: []api.EtcdMember{{Host: "10.1.1.2"}}}
	tgt := func(inf *api.Infra, life lifetimes) target {
		leaves, _, err := leafSpecs(c, inf)
		if err != nil {
			t.Fatal(err)
		}
		return target{cluster: "demo", life: life, leaves: leaves, server: kubeconfigServer(inf)}
	}
	p, err := b.fresh(tgt(inf, defaultLife))
	if err != nil {
		t.Fatal(err)
	}
	cas, err := b.openCAs(p)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()

	if pl := b.plan(p, cas, tgt(inf, defaultLife), now); !pl.empty() {
		t.Errorf("a fresh bundle needs work: %s", pl)
	}
	if pl := b.plan(p, cas, tgt(inf, defaultLife), now.Add(250*24*time.Hour)); len(pl.leaves) != 11 || pl.kubeconfigs != reasonRenewed {
		t.Errorf("after 250 of 365 days: %s; want every leaf due and kubeconfigs renewed", pl)
	}
	if pl := b.plan(p, cas, tgt(inf, lifetimes{CA: DefaultCALifetime, Leaf: time.Hour}), now); len(pl.leaves) != 11 || pl.leaves[api.CertAdmin] != reasonLifetime {
		t.Errorf("after shortening the leaf lifetime: %s; want every leaf reissued", pl)
	}
	// A leaf's expiry is compared with what issuing it now (on the real clock) would give,
	// not with the schedule's clock: a test's fake clock held behind real time does not make
	// leaves look longer-lived than asked.
	short, err := b.fresh(tgt(inf, lifetimes{CA: DefaultCALifetime, Leaf: time.Hour}))
	if err != nil {
		t.Fatal(err)
	}
	shortCAs, err := b.openCAs(short)
	if err != nil {
		t.Fatal(err)
	}
	if pl := b.plan(short, shortCAs, tgt(inf, lifetimes{CA: DefaultCALifetime, Leaf: time.Hour}), now.Add(-10*time.Minute)); !pl.empty() {
		t.Errorf("planned at a clock 10 minutes behind: %s; want nothing", pl)
	}
	moved := *inf
	moved.Endpoint.Host = "10.1.1.9"
	if pl := b.plan(p, cas, tgt(&moved, defaultLife), now); pl.String() != "apiserver=sans ignition-server=sans kubeconfigs=server" {
		t.Errorf("after the endpoint moved: %q", pl)
	}
	moved = *inf
	moved.Etcd = append(moved.Etcd, api.EtcdMember{Host: "10.1.1.3"})
	if pl := b.plan(p, cas, tgt(&moved, defaultLife), now); pl.String() != "etcd-peer=sans etcd-server=sans" {
		t.Errorf("after an etcd member was added: %q", pl)
	}
	requested := time.Now()
	p.RotationRequestedAt = &requested
	if pl := b.plan(p, cas, tgt(inf, defaultLife), now); len(pl.leaves) != 11 || pl.leaves[api.CertEtcdPeer] != reasonRequested {
		t.Errorf("after a rotation request: %s", pl)
	}
	if err := b.apply(p, cas, tgt(inf, defaultLife), b.plan(p, cas, tgt(inf, defaultLife), now)); err != nil {
		t.Fatal(err)
	}
	if p.RotationRequestedAt != nil {
		t.Error("apply did not clear the rotation request")
	}
	if pl := b.plan(p, cas, tgt(inf, defaultLife), now); !pl.empty() {
		t.Errorf("after apply the bundle still needs work: %s", pl)
	}
}

func TestBundle_SecretEncryptionKey_IsGeneratedOnceSealedAndKeptAcrossLeafRotations(t *testing.T) {
	seal, err := certs.LoadOrCreateSealKey(filepath.Join(t.TempDir(), "k"))
	if err != nil {
		t.Fatal(err)
	}
	b := &bundler{seal: seal, fraction: DefaultRenewFraction}
	inf := &api.Infra{Endpoint: api.Endpoint{Host: "10.1.1.1", Port: 6443}}
	leaves, _, err := leafSpecs(&api.Cluster{}, inf)
	if err != nil {
		t.Fatal(err)
	}
	tgt := target{cluster: "demo", life: defaultLife, leaves: leaves, server: kubeconfigServer(inf), encryption: api.SecretEncryptionAESCBC}
	p, err := b.fresh(tgt)
	if err != nil {
		t.Fatal(err)
	}
	e := p.SecretEncryption
	if e == nil || e.Type != api.SecretEncryptionAESCBC || len(e.Keys) != 1 || !strings.HasPrefix(e.Keys[0].Name, "key-") || e.Keys[0].CreatedAt.IsZero() {
		t.Fatalf("fresh bundle's secret encryption = %+v, want one aescbc key", e)
	}
	key, err := seal.Open(e.Keys[0].Sealed)
	if err != nil || len(key) != 32 {
		t.Fatalf("the sealed key opens to %d bytes (%v), want 32", len(key), err)
	}
	if bytes.Contains(e.Keys[0].Sealed, key) {
		t.Fatal("the key is stored in plaintext")
	}
	cas, err := b.openCAs(p)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if pl := b.plan(p, cas, tgt, now); !pl.empty() {
		t.Fatalf("a fresh bundle needs work: %s", pl)
	}

	// A leaf rotation keeps the key: data encrypted with it must stay readable.
	requested := now
	p.RotationRequestedAt = &requested
	if err := b.apply(p, cas, tgt, b.plan(p, cas, tgt, now)); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p.SecretEncryption, e) {
		t.Fatalf("a leaf rotation changed the encryption keys: %+v, want %+v", p.SecretEncryption, e)
	}

	// A record from before Secret encryption gets a key, and a new serial so kube-apiserver
	// is restarted with it.
	p.SecretEncryption = nil
	serial := p.Serial
	pl := b.plan(p, cas, tgt, now)
	if pl.String() != "secret-encryption-key=missing" {
		t.Fatalf("plan of a record without a key: %q", pl)
	}
	if err := b.apply(p, cas, tgt, pl); err != nil {
		t.Fatal(err)
	}
	if p.SecretEncryption == nil || len(p.SecretEncryption.Keys) != 1 || p.SecretEncryption.Keys[0].Name == e.Keys[0].Name || p.Serial == serial {
		t.Fatalf("after apply: keys %+v serial %q (was %q); want a new key and serial", p.SecretEncryption, p.Serial, serial)
	}

	st := status(p)
	if st.SecretEncryption == nil || len(st.SecretEncryption.Keys) != 1 || !st.SecretEncryption.Keys[0].Active ||
		st.SecretEncryption.Keys[0].Name != p.SecretEncryption.Keys[0].Name {
		t.Fatalf("status shows %+v", st.SecretEncryption)
	}
}

func TestUntilNext_IsTheTimeToTheNextRotationOnTheClock(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	p := &api.ClusterPKI{}
	if got := requeue(clk, p); got.RequeueAfter != 0 {
		t.Errorf("without a next rotation: requeue after %v, want none", got.RequeueAfter)
	}
	p.NextRotation = clk.Now().Add(time.Hour)
	if got := untilNext(clk, p); got != time.Hour {
		t.Errorf("an hour before the rotation: %v", got)
	}
	clk.Step(time.Hour)
	if got := untilNext(clk, p); got != minRequeue {
		t.Errorf("at the rotation: %v, want %v", got, minRequeue)
	}
}
