package process

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

const (
	// probeInterval is the pause between failed probes of a process that is not ready yet.
	probeInterval = 200 * time.Millisecond
	// probeTimeout bounds one probe; the probe's ctx carries it.
	probeTimeout = 5 * time.Second
)

// defaultProbeClient is HTTPProbe's client when it is given none. Its timeout only backs up
// the probe's ctx.
var defaultProbeClient = &http.Client{Timeout: 2 * probeTimeout}

// HTTPProbe returns a Probe that GETs url and wants a 2xx answer. client may be nil. header
// is sent with every request; a "Host" entry sets the request's Host. A non-2xx answer is
// reported as ErrProbeFailed with the status and the start of the body (kube-apiserver's
// /readyz names its failing checks there).
func HTTPProbe(client *http.Client, url string, header http.Header) Probe {
	if client == nil {
		client = defaultProbeClient
	}
	header = header.Clone()
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		for k, v := range header {
			req.Header[k] = v
		}
		if host := header.Get("Host"); host != "" {
			req.Host = host
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // lets the connection be reused
		if resp.StatusCode < 200 || resp.StatusCode > 299 {
			return fmt.Errorf("%w: GET %s: %s: %s", ErrProbeFailed, url, resp.Status,
				strings.TrimSpace(string(body)))
		}
		return nil
	}
}

// TCPProbe returns a Probe that wants a TCP connection to addr to succeed.
func TCPProbe(addr string) Probe {
	return func(ctx context.Context) error {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		return c.Close()
	}
}
