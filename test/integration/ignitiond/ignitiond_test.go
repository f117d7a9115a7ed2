package ignitiond_test

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/base64"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/daemon"
	"github.com/hostplane/hostplane/pkg/ignition"
	"github.com/hostplane/hostplane/pkg/testenv"
	"github.com/hostplane/hostplane/services/ignitiond"
)

const (
	docHello = `{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/hello","contents":{"source":"data:,hello"},"mode":420}]}}`
	docMotd  = "kind: MachineConfig\nspec:\n  config:\n    ignition:\n      version: 3.2.0\n    storage:\n      files:\n      - path: /etc/motd\n        contents:\n          source: data:,welcome\n"
	docBye   = `{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"/etc/bye","contents":{"source":"data:,bye"}}]}}`
)

// up runs the harness with one ready cluster "demo", an ignitiond with cfg and a pool
// "workers" ready for hash "h1".
func up(t *testing.T, cfg ignitiond.Config) (*harness, *ignitiondProc, *api.IgnitionTokens) {
	t.Helper()
	h := newHarness(t)
	h.createCluster("demo")
	p := h.startIgnitiond(cfg)
	h.waitServer("demo")
	h.putPool("demo", "workers", poolSpec{
		hash: "h1", release: "1.34.4",
		labels: map[string]string{"tier": "web"},
		taints: []api.Taint{{Key: "dedicated", Value: "web", Effect: "NoSchedule"}},
		config: []api.ConfigDocument{{Name: "hello", Content: docHello}, {Name: "motd", Content: docMotd}},
	})
	return h, p, h.readyFor("demo", "workers", "h1")
}

func TestIgnition_ValidTokenGetsAValidatedPayloadWithTheFilesOfItsHash(t *testing.T) {
	h, p, rec := up(t, ignitiond.Config{})
	srv := h.waitServer("demo")
	pki, _, err := h.pki.Get(h.Ctx, "demo")
	if err != nil {
		t.Fatal(err)
	}
	if srv.CertSerial != pki.Serial {
		t.Errorf("server record serial %q, PKI %q", srv.CertSerial, pki.Serial)
	}
	inf, _, _ := h.infra.Get(h.Ctx, "demo")
	if want := net.JoinHostPort(inf.Ignition.Host, itoa(inf.Ignition.Port)); srv.Endpoint != want {
		t.Errorf("endpoint %q, infra allocated %q", srv.Endpoint, want)
	}

	// The userdata is a stub pointing at the endpoint, trusting root-ca, with the token.
	s := stub(t, rec)
	rootPEM, _ := h.rootCA("demo")
	if s.URL != "https://"+srv.Endpoint+"/ignition" || !bytes.Equal(s.CAPEM, rootPEM) || s.Token != rec.Current.Token {
		t.Fatalf("stub %+v", s)
	}
	if raw, err := base64.RawURLEncoding.DecodeString(s.Token); err != nil || len(raw) != 32 {
		t.Errorf("token %q is not 32 bytes of base64url", s.Token)
	}
	if !regexp.MustCompile(`^[a-z0-9]{6}$`).MatchString(rec.Current.BootstrapTokenID) {
		t.Errorf("bootstrap token id %q", rec.Current.BootstrapTokenID)
	}
	h.waitEvent(ignitiond.VerbReady, "demo/workers", 1)
	h.waitEvent(ignitiond.VerbServer, "demo", 1)

	c := h.client("demo")
	got := parsePayload(t, fetch(t, c, s.URL, "Bearer "+s.Token))
	if !bytes.Equal(got.ca, rootPEM) {
		t.Error("ca.crt is not the root CA")
	}
	kc, err := clientcmd.Load(got.kubeconfig)
	if err != nil {
		t.Fatalf("bootstrap kubeconfig: %v", err)
	}
	kctx := kc.Contexts[kc.CurrentContext]
	cl, user := kc.Clusters[kctx.Cluster], kc.AuthInfos[kctx.AuthInfo]
	if cl.Server != pki.KubeconfigServer || !bytes.Equal(cl.CertificateAuthorityData, rootPEM) {
		t.Errorf("bootstrap kubeconfig cluster %s, want %s with root-ca", cl.Server, pki.KubeconfigServer)
	}
	if !regexp.MustCompile(`^` + rec.Current.BootstrapTokenID + `\.[a-z0-9]{16}$`).MatchString(user.Token) {
		t.Errorf("bootstrap token %q is not <id>.<16 [a-z0-9]>", user.Token)
	}
	want := ignition.KubeletConfig{
		NodeLabels:     map[string]string{"tier": "web", api.LabelNodePool: "workers"},
		Taints:         []api.Taint{{Key: "dedicated", Value: "web", Effect: "NoSchedule"}},
		ConfigHash:     "h1",
		KubeletVersion: "v1.34.4",
	}
	if !equalJSON(got.kubelet, want) {
		t.Errorf("kubelet.json %+v, want %+v", got.kubelet, want)
	}
	if got.files["/etc/hello"] != "hello" || got.files["/etc/motd"] != "welcome" {
		t.Errorf("the config documents are not merged in: %v", got.files)
	}

	// The second request is served from the cache; a label change (new generation) is not.
	fetch(t, c, s.URL, "Bearer "+s.Token)
	if v := p.metric(t, ignitiond.MetricPayloadCache, map[string]string{"result": "hit"}); v < 1 {
		t.Errorf("cache hits %v", v)
	}
	h.putPool("demo", "workers", poolSpec{hash: "h1", release: "1.34.4", labels: map[string]string{"tier": "db"},
		config: []api.ConfigDocument{{Name: "hello", Content: docHello}, {Name: "motd", Content: docMotd}}})
	testenv.Eventually(t, wait, func() bool {
		return parsePayload(t, fetch(t, c, s.URL, "Bearer "+s.Token)).kubelet.NodeLabels["tier"] == "db"
	}, "the payload follows a label change")
	if v := p.metric(t, ignitiond.MetricRequests, map[string]string{"outcome": ignitiond.OutcomeServed}); v < 3 {
		t.Errorf("served requests %v", v)
	}
	if r := fetch(t, c, "https://"+srv.Endpoint+"/healthz"); r.status != http.StatusOK {
		t.Errorf("/healthz: %d", r.status)
	}
	if r := fetch(t, c, "https://"+srv.Endpoint+"/metrics"); r.status != http.StatusNotFound {
		t.Errorf("/metrics on the Ignition port: %d", r.status)
	}
}

func TestIgnition_RefusesMissingMalformedUnknownAndForeignTokensWith401AndAnEmptyBody(t *testing.T) {
	h, p, rec := up(t, ignitiond.Config{})
	h.createCluster("other")
	other := h.waitServer("other")
	h.putPool("other", "workers", poolSpec{hash: "o1", release: "1.34.4"})
	foreign := h.readyFor("other", "workers", "o1")

	url := stub(t, rec).URL
	tok := rec.Current.Token
	c := h.client("demo")
	tests := []struct {
		name string
		auth []string
	}{
		{"no header", nil},
		{"basic scheme", []string{"Basic " + tok}},
		{"no token", []string{"Bearer "}},
		{"short token", []string{"Bearer " + tok[:20]}},
		{"bad characters", []string{"Bearer " + strings.Repeat("!", 43)}},
		{"two headers", []string{"Bearer " + tok, "Bearer " + tok}},
		{"unknown token", []string{"Bearer " + strings.Repeat("A", 43)}},
		{"another cluster's token", []string{"Bearer " + foreign.Current.Token}},
	}
	for _, tt := range tests {
		r := fetch(t, c, url, tt.auth...)
		if r.status != http.StatusUnauthorized || len(r.body) != 0 {
			t.Errorf("%s: %d %q, want 401 with an empty body", tt.name, r.status, r.body)
		}
	}
	if r := fetch(t, c, url, "Bearer "+tok); r.status != http.StatusOK {
		t.Fatalf("the valid token: %d", r.status)
	}
	// The foreign token is valid on its own cluster's listener.
	if r := fetch(t, h.client("other"), "https://"+other.Endpoint+"/ignition", "Bearer "+foreign.Current.Token); r.status != http.StatusOK {
		t.Fatalf("the other cluster's token on its listener: %d", r.status)
	}
	for outcome, min := range map[string]float64{ignitiond.TokenMalformed: 6, ignitiond.TokenUnknown: 2, ignitiond.TokenCurrent: 1} {
		if v := p.metric(t, ignitiond.MetricTokens, map[string]string{"outcome": outcome}); v < min {
			t.Errorf("tokens{outcome=%s} = %v, want >= %v", outcome, v, min)
		}
	}
	if v := p.metric(t, ignitiond.MetricRequests, map[string]string{"outcome": ignitiond.OutcomeUnauthorized}); v < 8 {
		t.Errorf("unauthorized requests %v", v)
	}
	if v := p.metric(t, ignitiond.MetricListeners, nil); v != 2 {
		t.Errorf("listeners %v, want 2", v)
	}
}

func TestIgnition_AfterAConfigChangeTheOldTokenGetsTheOldPayloadUntilItsGraceEnds(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	h, p, first := up(t, ignitiond.Config{Base: daemon.Base{Clock: clk}})
	url := stub(t, first).URL
	c := h.client("demo")

	h.putPool("demo", "workers", poolSpec{hash: "h2", release: "1.33.7",
		config: []api.ConfigDocument{{Name: "bye", Content: docBye}}})
	second := h.readyFor("demo", "workers", "h2")
	if second.Previous == nil || second.Previous.Token != first.Current.Token || second.Previous.ValidUntil == nil {
		t.Fatalf("the old token is not Previous with a grace: %+v", second.Previous)
	}
	if want := clk.Now().UTC().Add(ignitiond.DefaultGrace); !second.Previous.ValidUntil.Equal(want) {
		t.Errorf("the old token is valid until %v, want the default grace from now, %v", second.Previous.ValidUntil, want)
	}
	if stub(t, second).Token != second.Current.Token || second.Current.Token == first.Current.Token {
		t.Fatal("the userdata does not carry the new token")
	}

	// Each token gets the payload of its own hash.
	old := parsePayload(t, fetch(t, c, url, "Bearer "+first.Current.Token))
	if old.kubelet.ConfigHash != "h1" || old.kubelet.KubeletVersion != "v1.34.4" || old.files["/etc/hello"] != "hello" || old.files["/etc/bye"] != "" {
		t.Errorf("the old token got %+v, %v; want the h1 payload", old.kubelet, old.files)
	}
	newPayload := parsePayload(t, fetch(t, c, url, "Bearer "+second.Current.Token))
	if newPayload.kubelet.ConfigHash != "h2" || newPayload.kubelet.KubeletVersion != "v1.33.7" || newPayload.files["/etc/bye"] != "bye" || newPayload.files["/etc/hello"] != "" {
		t.Errorf("the new token got %+v, %v; want the h2 payload", newPayload.kubelet, newPayload.files)
	}
	h.waitEvent(ignitiond.VerbReady, "demo/workers", 2)

	// Just before the grace ends the old token still works; at its end it is refused and, at
	// the pool's next look, dropped from the record.
	clk.SetTime(second.Previous.ValidUntil.Add(-time.Second))
	if r := fetch(t, c, url, "Bearer "+first.Current.Token); r.status != http.StatusOK {
		t.Errorf("the old token a second before its grace ends: %d", r.status)
	}
	clk.SetTime(*second.Previous.ValidUntil)
	if r := fetch(t, c, url, "Bearer "+first.Current.Token); r.status != http.StatusUnauthorized || len(r.body) != 0 {
		t.Errorf("the old token after its grace: %d %q, want 401 with an empty body", r.status, r.body)
	}
	h.nudgePool("demo", "workers")
	h.waitTokens("demo", "workers", "Previous dropped", func(r *api.IgnitionTokens) bool { return r.Previous == nil })
	if r := fetch(t, c, url, "Bearer "+second.Current.Token); r.status != http.StatusOK {
		t.Fatalf("the new token after the grace: %d", r.status)
	}
	if v := p.metric(t, ignitiond.MetricTokens, map[string]string{"outcome": ignitiond.TokenExpired}) +
		p.metric(t, ignitiond.MetricTokens, map[string]string{"outcome": ignitiond.TokenUnknown}); v < 1 {
		t.Errorf("expired or unknown tokens %v", v)
	}
}

func TestIgnition_RotatesTheTokenAtHalfLifeKeepingTheHash(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	const ttl = 24 * time.Hour
	h, p, first := up(t, ignitiond.Config{Base: daemon.Base{Clock: clk}, TokenTTL: ttl, Grace: time.Minute})

	halfLife := first.Current.IssuedAt.Add(ttl / 2)
	if next := first.Current.ExpiresAt.Sub(first.Current.IssuedAt); next != ttl {
		t.Errorf("lifetime %v, want %v", next, ttl)
	}
	clk.SetTime(halfLife)
	h.nudgePool("demo", "workers")
	h.waitEvent(ignitiond.VerbRotated, "demo/workers", 1)
	rotated := h.waitTokens("demo", "workers", "rotated", func(r *api.IgnitionTokens) bool {
		return r.Current.Token != first.Current.Token
	})
	if h.events.count(ignitiond.VerbRotated, "demo/workers") != 1 {
		t.Errorf("%d rotations, want 1", h.events.count(ignitiond.VerbRotated, "demo/workers"))
	}
	if rotated.Current.ConfigHash != "h1" || rotated.Current.Release != "1.34.4" || len(rotated.Current.Config) != 2 {
		t.Errorf("the rotated token serves %q %q (%d documents), want the same hash", rotated.Current.ConfigHash, rotated.Current.Release, len(rotated.Current.Config))
	}
	if bytes.Equal(rotated.UserData, first.UserData) || stub(t, rotated).Token != rotated.Current.Token {
		t.Error("the userdata did not change with the token")
	}
	if !rotated.Current.IssuedAt.Equal(halfLife) || rotated.Current.ExpiresAt.Sub(rotated.Current.IssuedAt) != ttl {
		t.Errorf("the rotated token is issued %v and expires %v, want issued at the first's half-life %v for %v",
			rotated.Current.IssuedAt, rotated.Current.ExpiresAt, halfLife, ttl)
	}
	if v := p.metric(t, ignitiond.MetricTokenRotations, nil); v < 1 {
		t.Errorf("rotations %v", v)
	}
	c := h.client("demo")
	url := stub(t, rotated).URL
	if r := parsePayload(t, fetch(t, c, url, "Bearer "+rotated.Current.Token)); r.kubelet.ConfigHash != "h1" {
		t.Errorf("the rotated token's payload hash %q", r.kubelet.ConfigHash)
	}
	// The replaced token is refused once its grace is over, the rotated one still served.
	clk.Step(time.Minute)
	if r := fetch(t, c, url, "Bearer "+first.Current.Token); r.status != http.StatusUnauthorized {
		t.Errorf("the first token after its grace: %d, want 401", r.status)
	}
	if r := fetch(t, c, url, "Bearer "+rotated.Current.Token); r.status != http.StatusOK {
		t.Errorf("the rotated token: %d", r.status)
	}
}

func TestIgnition_RestartKeepsServingTheSameTokens(t *testing.T) {
	h, p, rec := up(t, ignitiond.Config{})
	url := stub(t, rec).URL
	c := h.client("demo")
	before := parsePayload(t, fetch(t, c, url, "Bearer "+rec.Current.Token))
	p.stop()
	if _, err := net.DialTimeout("tcp", strings.TrimSuffix(strings.TrimPrefix(url, "https://"), "/ignition"), time.Second); err == nil {
		t.Error("the listener is open after ignitiond stopped")
	}

	h.startIgnitiond(ignitiond.Config{})
	testenv.Eventually(t, wait, func() bool {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
		req.Header.Set("Authorization", "Bearer "+rec.Current.Token)
		resp, err := c.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, "the token served after the restart")
	after := parsePayload(t, fetch(t, c, url, "Bearer "+rec.Current.Token))
	if !bytes.Equal(before.kubeconfig, after.kubeconfig) || after.kubelet.ConfigHash != "h1" {
		t.Error("the payload changed across the restart (the bootstrap token must be the same)")
	}
	now, _, err := h.tokens.Get(h.Ctx, "demo.workers")
	if err != nil || now.Current.Token != rec.Current.Token || now.Current.BootstrapTokenID != rec.Current.BootstrapTokenID {
		t.Errorf("the restart re-minted the token: %+v (%v)", now, err)
	}
}

func TestIgnition_PKIRotationSwapsTheCertificateWithoutClosingTheListener(t *testing.T) {
	h, _, rec := up(t, ignitiond.Config{})
	srv := h.waitServer("demo")
	_, roots := h.rootCA("demo")
	conn, err := tls.Dial("tcp", srv.Endpoint, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	oldSerial := conn.ConnectionState().PeerCertificates[0].SerialNumber
	rd := bufio.NewReader(conn)
	healthz := func() int {
		if _, err := conn.Write([]byte("GET /healthz HTTP/1.1\r\nHost: ignition\r\n\r\n")); err != nil {
			t.Fatalf("the open connection broke: %v", err)
		}
		resp, err := http.ReadResponse(rd, nil)
		if err != nil {
			t.Fatalf("the open connection broke: %v", err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if healthz() != http.StatusOK {
		t.Fatal("healthz")
	}

	resp, err := http.Post(h.pkidURL+"/v1/clusters/demo/pki/rotate", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		t.Fatalf("rotate: %d", resp.StatusCode)
	}
	rotated := h.waitServer("demo", func(s *api.IgnitionServer) bool { return s.CertSerial != srv.CertSerial })
	h.waitEvent(ignitiond.VerbServer, "demo", 2)

	testenv.Eventually(t, wait, func() bool {
		c, err := tls.Dial("tcp", rotated.Endpoint, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"})
		if err != nil {
			return false
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.Cmp(oldSerial) != 0
	}, "new connections get the renewed certificate")
	if healthz() != http.StatusOK {
		t.Fatal("the connection opened before the rotation stopped working")
	}
	if r := fetch(t, h.client("demo"), stub(t, rec).URL, "Bearer "+rec.Current.Token); r.status != http.StatusOK {
		t.Fatalf("the token after the PKI rotation: %d", r.status)
	}
}

func TestIgnition_DeletedPoolLosesItsTokensAndRecord(t *testing.T) {
	// No guest control plane runs here: the removal of its bootstrap token gives up quickly.
	h, _, rec := up(t, ignitiond.Config{GuestCleanupTimeout: time.Second})
	url := stub(t, rec).URL
	h.deletePool("demo", "workers")
	testenv.Eventually(t, wait, func() bool {
		_, _, err := h.tokens.Get(h.Ctx, "demo.workers")
		return err != nil
	}, "the token record deleted")
	h.waitEvent(ignitiond.VerbDeleted, "demo/workers", 1)
	if r := fetch(t, h.client("demo"), url, "Bearer "+rec.Current.Token); r.status != http.StatusUnauthorized {
		t.Fatalf("a deleted pool's token: %d", r.status)
	}
}

func TestIgnition_DeletingTheClusterClosesTheListenerAndDeletesEveryKey(t *testing.T) {
	h, p, _ := up(t, ignitiond.Config{})
	h.putPool("demo", "more", poolSpec{hash: "m1", release: "1.34.4"})
	h.readyFor("demo", "more", "m1")
	srv := h.waitServer("demo")

	h.MarkClusterDeleting("demo")
	testenv.Eventually(t, wait, func() bool {
		keys, err := h.tokens.Keys(h.Ctx, "demo", "demo.*")
		return err == nil && len(keys) == 0
	}, "every ignition key of the cluster deleted")
	for _, k := range []string{"demo/workers", "demo/more", "demo"} {
		h.waitEvent(ignitiond.VerbDeleted, k, 1)
	}
	if c, err := net.DialTimeout("tcp", srv.Endpoint, time.Second); err == nil {
		c.Close()
		t.Error("the listener is still open")
	}
	if v := p.metric(t, ignitiond.MetricListeners, nil); v != 0 {
		t.Errorf("listeners %v", v)
	}
}

func TestIgnition_AConfigThatFailsValidationIsNeverServed(t *testing.T) {
	h, p, _ := up(t, ignitiond.Config{})
	// Valid alone, but hostplane's files would go through the symlink: nodepoold would
	// refuse it (ValidateDocuments); ignitiond must not serve it either.
	link := `{"ignition":{"version":"3.4.0"},"storage":{"links":[{"path":"/etc/kubernetes","target":"/tmp"}]}}`
	h.putPool("demo", "workers", poolSpec{hash: "bad", release: "1.34.4", config: []api.ConfigDocument{{Name: "link", Content: link}}})
	rec := h.waitTokens("demo", "workers", "minted for the bad hash", func(r *api.IgnitionTokens) bool { return r.Current.ConfigHash == "bad" })
	if rec.Ready || !strings.Contains(rec.Message, "spec.config") {
		t.Errorf("record ready %v, message %q; want not ready, naming spec.config", rec.Ready, rec.Message)
	}
	r := fetch(t, h.client("demo"), stub(t, rec).URL, "Bearer "+rec.Current.Token)
	if r.status != http.StatusInternalServerError || bytes.Contains(r.body, []byte("kubernetes")) {
		t.Fatalf("GET: %d %q, want 500 without detail", r.status, r.body)
	}
	if v := p.metric(t, ignitiond.MetricRequests, map[string]string{"outcome": ignitiond.OutcomeInvalidConfig}); v != 1 {
		t.Errorf("invalid_config requests %v", v)
	}
}
