package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hostplane/hostplane/cmd/hostplane/gateway"
	"github.com/hostplane/hostplane/pkg/daemon"
	"github.com/hostplane/hostplane/pkg/testenv"
	"github.com/hostplane/hostplane/services/clusterd"
)

// BenchmarkGateway_ListClustersDirectAndThroughTheGateway measures what `hostplane gateway`
// adds to an API call: a real clusterd (its own admin port, access control on, 20 clusters
// in its bucket) answers GET /v1/clusters, once straight and once through the gateway, with
// the same client (8 workers sharing 4,000 requests, keep-alive); twice each, the second round reported.
func BenchmarkGateway_ListClustersDirectAndThroughTheGateway(b *testing.B) {
	reqs := testenv.EnvInt(b, "HOSTPLANE_BENCH_GATEWAY_REQS", 4000, 1)
	env := testenv.NATS(b)
	const token = "bench-gateway-admin-token-0123456789"
	d, err := clusterd.New(clusterd.Config{Base: daemon.Base{
		NATSURL: env.Server.URL(), NATSNKeyFile: env.SeedFile(clusterd.Name), DataDir: b.TempDir(), AdminAddr: "127.0.0.1:0", AdminToken: token,
		Logger: slog.New(slog.DiscardHandler),
	}})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	b.Cleanup(func() { cancel(); <-done })
	addr := d.AdminAddr(ctx)
	direct := "http://" + addr
	testenv.Eventually(b, time.Minute, func() bool { return d.Ready(ctx) == nil }, "clusterd never became ready")

	backends := map[string]string{}
	owners, _ := gateway.Owners()
	for _, o := range owners {
		backends[o] = "http://127.0.0.1:1" // not part of this benchmark
	}
	backends[clusterd.Name] = direct
	h, err := gateway.New(gateway.Config{Backends: backends})
	if err != nil {
		b.Fatal(err)
	}
	gw := httptest.NewServer(h)
	b.Cleanup(gw.Close)

	hc := newIgnitionClient(nil)
	for i := range 20 {
		body := fmt.Sprintf(`{"name":"bench-%02d","spec":{"release":{"version":"%s"}}}`, i, benchRelease)
		req, _ := http.NewRequest(http.MethodPost, direct+"/v1/clusters", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			b.Fatalf("create cluster %d: %s", i, resp.Status)
		}
	}
	// The list is measured once clusterd has reconciled every cluster (the size settles).
	var list []byte
	testenv.Eventually(b, time.Minute, func() bool {
		req, _ := http.NewRequest(http.MethodGet, direct+"/v1/clusters", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := hc.Do(req)
		if err != nil {
			return false
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		settled := len(got) == len(list)
		list = got
		if !settled {
			time.Sleep(500 * time.Millisecond) // a benchmark's settle interval, not a test's sync
		}
		return settled
	}, "the cluster list never settled")
	b.ResetTimer()
	var directRes, gwRes loadResult
	for round := range 2 {
		directRes = hammer(b, hc, direct+"/v1/clusters", token, reqs, len(list))
		gwRes = hammer(b, hc, gw.URL+"/v1/clusters", token, reqs, len(list))
		detail(b, "round %d, response %d bytes, %d workers × %d requests:\n  clusterd: %s\n  via gateway: %s",
			round+1, len(list), ignitionWorkers, reqs, directRes, gwRes)
	}
	b.StopTimer()
	b.ReportMetric(directRes.rps, "direct-req/s")
	b.ReportMetric(seconds(directRes.p99)*1000, "direct-p99-ms")
	b.ReportMetric(gwRes.rps, "gateway-req/s")
	b.ReportMetric(seconds(gwRes.p99)*1000, "gateway-p99-ms")
	b.ReportMetric(0, "ns/op")
}
