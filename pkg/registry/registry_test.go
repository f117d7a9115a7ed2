package registry_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hostplane/hostplane/pkg/registry"
)

// client speaks the OCI distribution API to r, trusting its CA and, unless anonymous,
// authenticated as its user.
type client struct {
	t         *testing.T
	r         *registry.Registry
	http      *http.Client
	anonymous bool
}

func newClient(t *testing.T, r *registry.Registry) *client {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(r.CAPEM()) {
		t.Fatal("the registry's CA is not PEM")
	}
	return &client{t: t, r: r, http: &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}}
}

func (c *client) do(method, path, contentType string, body []byte) (*http.Response, []byte) {
	c.t.Helper()
	url := path
	if !strings.HasPrefix(path, "https://") {
		url = c.r.URL() + path
	}
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/vnd.oci.image.manifest.v1+json")
	if !c.anonymous {
		req.Header.Set("Authorization", c.r.BasicAuth())
	}
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// pushBlob uploads b to repo in one monolithic PUT.
func (c *client) pushBlob(repo string, b []byte) string {
	c.t.Helper()
	resp, body := c.do("POST", "/v2/"+repo+"/blobs/uploads/", "", nil)
	if resp.StatusCode != http.StatusAccepted {
		c.t.Fatalf("start upload: %s %s", resp.Status, body)
	}
	loc := resp.Header.Get("Location")
	if !strings.HasPrefix(loc, "https://") {
		loc = c.r.URL() + loc
	}
	sep := "?"
	if strings.Contains(loc, "?") {
		sep = "&"
	}
	d := digest(b)
	if resp, body := c.do("PUT", loc+sep+"digest="+d, "application/octet-stream", b); resp.StatusCode != http.StatusCreated {
		c.t.Fatalf("finish upload: %s %s", resp.Status, body)
	}
	return d
}

// pushImage pushes a one-layer image (the layer's bytes are opaque to the registry) as
// repo:tag and returns its manifest's digest.
func (c *client) pushImage(repo, tag string, layer []byte) string {
	c.t.Helper()
	config := []byte(`{"architecture":"amd64","os":"linux","config":{"Entrypoint":["/echo"]},"rootfs":{"type":"layers","diff_ids":["` + digest(layer) + `"]}}`)
	cd, ld := c.pushBlob(repo, config), c.pushBlob(repo, layer)
	manifest, _ := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
		"config": map[string]any{"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cd, "size": len(config)},
		"layers": []any{map[string]any{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": ld, "size": len(layer)}},
	})
	resp, body := c.do("PUT", "/v2/"+repo+"/manifests/"+tag, "application/vnd.oci.image.manifest.v1+json", manifest)
	if resp.StatusCode != http.StatusCreated {
		c.t.Fatalf("push manifest: %s %s", resp.Status, body)
	}
	return digest(manifest)
}

func start(t *testing.T, dir string) *registry.Registry {
	t.Helper()
	r, err := registry.Start(context.Background(), registry.Config{Dir: dir, Host: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Stop(context.Background()) })
	return r
}

// The registry serves what is pushed to it over TLS, only to its user, and keeps its images,
// CA and credential across a restart on the same directory.
func TestRegistry_ServesPushedImagesToItsUserOnlyAndKeepsThemAcrossARestart(t *testing.T) {
	dir := t.TempDir()
	r := start(t, dir)
	c := newClient(t, r)
	layer := bytes.Repeat([]byte("layer"), 1000)
	md := c.pushImage("hostplane/echo", "1", layer)

	resp, body := c.do("GET", "/v2/hostplane/echo/manifests/1", "", nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Docker-Content-Digest") != md {
		t.Fatalf("pull manifest: %s %s (digest %s, want %s)", resp.Status, body, resp.Header.Get("Docker-Content-Digest"), md)
	}
	if resp, body := c.do("GET", "/v2/hostplane/echo/blobs/"+digest(layer), "", nil); resp.StatusCode != http.StatusOK || !bytes.Equal(body, layer) {
		t.Fatalf("pull layer: %s (%d bytes)", resp.Status, len(body))
	}

	// Push builds a FROM-scratch image of host files and pushes it as the registry's user.
	bin := filepath.Join(t.TempDir(), "pause")
	if err := os.WriteFile(bin, []byte("#!/bin/true\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	pd, err := r.Push(context.Background(), registry.Image{Repo: "hostplane/pause", Tag: "1", Files: map[string]string{"/pause": bin}, Entrypoint: []string{"/pause"}})
	if err != nil {
		t.Fatal(err)
	}
	if resp, body := c.do("GET", "/v2/hostplane/pause/manifests/1", "", nil); resp.StatusCode != http.StatusOK || resp.Header.Get("Docker-Content-Digest") != pd {
		t.Fatalf("pull the pushed image: %s %s (digest %s, want %s)", resp.Status, body, resp.Header.Get("Docker-Content-Digest"), pd)
	}
	if got := r.Ref("hostplane/pause", "1"); got != r.Host()+"/hostplane/pause:1" {
		t.Errorf("Ref = %s", got)
	}

	anon := newClient(t, r)
	anon.anonymous = true
	if resp, _ := anon.do("GET", "/v2/hostplane/echo/manifests/1", "", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("anonymous pull: %s, want 401", resp.Status)
	}
	if _, err := http.Get(r.URL() + "/v2/"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a client that does not trust the registry's CA connected: %v", err)
	}

	user, pass := r.Credentials()
	ca, host := r.CAPEM(), r.Host()
	if err := r.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	r2 := start(t, dir)
	if u2, p2 := r2.Credentials(); u2 != user || p2 != pass || r2.Host() != host || !bytes.Equal(r2.CAPEM(), ca) {
		t.Fatalf("the restart changed the registry: %s %s, CA kept %v", u2, r2.Host(), bytes.Equal(r2.CAPEM(), ca))
	}
	if resp, body := newClient(t, r2).do("GET", "/v2/hostplane/echo/manifests/1", "", nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("after the restart: %s %s", resp.Status, body)
	}
}

func TestStart_WithoutTheBinarySaysHowToBuildIt(t *testing.T) {
	t.Setenv("HOSTPLANE_CACHE_DIR", t.TempDir())
	_, err := registry.Start(context.Background(), registry.Config{Dir: t.TempDir(), Host: "127.0.0.1"})
	if err == nil || !strings.Contains(err.Error(), "make registry") {
		t.Fatalf("Start = %v, want how to build the registry", err)
	}
}
