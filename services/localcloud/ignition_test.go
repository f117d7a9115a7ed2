package localcloud

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	igntypes "github.com/coreos/ignition/v2/config/v3_5/types"
	"github.com/vincent-petithory/dataurl"

	lct "github.com/hostplane/hostplane/services/localcloud/localcloudtest"
)

const testKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: guest
  cluster: {server: "https://127.0.0.1:6443"}
users:
- name: bootstrap
  user: {token: "abcdef.0123456789abcdef"}
contexts:
- name: bootstrap
  context: {cluster: guest, user: bootstrap}
current-context: bootstrap
`

// fastPool retries fetches at once, so retry cases take no wall time.
func fastPool() *guestPool {
	p := newGuestPool()
	p.backoff = func(int) time.Duration { return time.Millisecond }
	return p
}

func TestIgnition_ResolvesTheStubAndWritesTheFilesOfTheFetchedConfig(t *testing.T) {
	srv := lct.NewIgnitionServer(t)
	other := lct.NewIgnitionServer(t) // a CA the server's certificate is not signed by
	kubelet := KubeletConfig{NodeLabels: map[string]string{"pool": "a"}, ConfigHash: "h1", KubeletVersion: "v1.34.4"}
	srv.Set(t, "good", lct.NodePayload(t, []byte(testKubeconfig), srv.CAPEM, kubelet))
	srv.SetRaw("malformed", []byte(`{"ignition": {"version": "3.5.0"`))
	srv.SetRaw("old-version", []byte(`{"ignition": {"version": "2.2.0"}}`))
	srv.SetRaw("bad-file", []byte(`{"ignition": {"version": "3.4.0"}, "storage": {"files": [{"path": "relative/path"}]}}`))
	srv.SetRaw("no-kubelet", []byte(`{"ignition": {"version": "3.3.0"}}`))

	noSource := []byte(`{"ignition": {"version": "3.5.0", "config": {"merge": [{"httpHeaders": [{"name": "Authorization", "value": "Bearer good"}]}]},
		"security": {"tls": {"certificateAuthorities": [{"source": "` + dataurl.New(srv.CAPEM, "text/plain").String() + `"}]}}}}`)
	noCA := []byte(`{"ignition": {"version": "3.5.0", "config": {"merge": [{"source": "` + srv.URL + `"}]}}}`)

	tests := []struct {
		name     string
		userData []byte
		refuse   int64
		wantErr  string // substring; "" = success
		invalid  bool   // the error is ErrInvalidConfig
		retries  int    // failed attempts reported to the retry func
	}{
		{name: "good stub", userData: srv.Stub(t, "good")},
		{name: "server answers 401 twice, then serves", userData: srv.Stub(t, "good"), refuse: 2, retries: 2},
		{name: "stub trusts another CA", userData: lct.Stub(t, srv.URL, "good", other.CAPEM), wantErr: "certificate", retries: 1},
		{name: "stub without merge source", userData: noSource, wantErr: "source", invalid: true},
		{name: "stub without CA", userData: noCA, wantErr: "certificateAuthorities", invalid: true},
		{name: "stub is not JSON", userData: []byte("#!/bin/sh\necho hi"), wantErr: "invalid Ignition config", invalid: true},
		{name: "fetched config is malformed", userData: srv.Stub(t, "malformed"), wantErr: "invalid Ignition config", invalid: true},
		{name: "fetched config has an unsupported version", userData: srv.Stub(t, "old-version"), wantErr: "version", invalid: true},
		{name: "fetched config fails validation", userData: srv.Stub(t, "bad-file"), wantErr: "path", invalid: true},
		{name: "fetched config lacks the kubelet files", userData: srv.Stub(t, "no-kubelet"), wantErr: PathBootstrapKubeconfig, invalid: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv.Refuse.Store(tc.refuse)
			retries := 0
			retry := func(err error) error {
				retries++
				if tc.wantErr != "" {
					return err // a failing case: stop at the first failed attempt
				}
				return nil
			}
			root := t.TempDir()
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			cfg, err := fastPool().ignition(ctx, tc.userData, fetchHooks{retry: retry})
			var nc *nodeConfig
			if err == nil {
				err = applyConfig(root, cfg, false)
			}
			if err == nil {
				nc, err = readNodeConfig(root)
			}
			if retries != tc.retries {
				t.Errorf("retry func called %d times, want %d (last error %v)", retries, tc.retries, err)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
				}
				if tc.invalid != errors.Is(err, ErrInvalidConfig) {
					t.Fatalf("errors.Is(%v, ErrInvalidConfig) = %v, want %v", err, !tc.invalid, tc.invalid)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if nc.Kubelet.ConfigHash != "h1" || nc.Kubelet.KubeletVersion != "v1.34.4" || nc.Kubelet.NodeLabels["pool"] != "a" {
				t.Errorf("kubelet.json = %+v", nc.Kubelet)
			}
			if !bytes.Equal(nc.CA, srv.CAPEM) || string(nc.Bootstrap) != testKubeconfig {
				t.Error("CA or bootstrap kubeconfig not written as served")
			}
			fi, err := os.Stat(filepath.Join(root, PathBootstrapKubeconfig))
			if err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("bootstrap kubeconfig: %v, mode %v; want 0600", err, fi.Mode())
			}
		})
	}
}

func TestApplyConfig_WritesFilesAsIgnitionDoes(t *testing.T) {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte("compressed\n"))
	_ = zw.Close()
	gzip := "gzip"
	cfg := lct.Payload(
		lct.File{Path: "/etc/plain", Contents: "plain\n"},
		lct.File{Path: "/etc/secret", Contents: "s3cret", Mode: 0o600},
		lct.File{Path: "/../../escape", Contents: "inside"},
	)
	cfg.Storage.Files = append(cfg.Storage.Files,
		igntypes.File{Node: igntypes.Node{Path: "/etc/gz"}, FileEmbedded1: igntypes.FileEmbedded1{Contents: igntypes.Resource{
			Source: new(dataurl.New(gz.Bytes(), "application/octet-stream").String()), Compression: &gzip,
		}}},
		igntypes.File{Node: igntypes.Node{Path: "/etc/percent"}, FileEmbedded1: igntypes.FileEmbedded1{
			Contents: igntypes.Resource{Source: new("data:,a%20b%0A")},
			Append:   []igntypes.Resource{{Source: new("data:,more")}},
		}},
	)
	cfg.Storage.Directories = []igntypes.Directory{{Node: igntypes.Node{Path: "/var/lib/kubelet"}, DirectoryEmbedded1: igntypes.DirectoryEmbedded1{Mode: new(0o700)}}}
	root := t.TempDir()
	if err := applyConfig(root, cfg, false); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		"etc/plain": "plain\n", "etc/secret": "s3cret", "escape": "inside", "etc/gz": "compressed\n", "etc/percent": "a b\nmore",
	} {
		got, err := os.ReadFile(filepath.Join(root, path))
		if err != nil || string(got) != want {
			t.Errorf("%s = %q, %v; want %q", path, got, err, want)
		}
	}
	modes := map[string]os.FileMode{"etc/plain": 0o644, "etc/secret": 0o600, "var/lib/kubelet": 0o700}
	for path, want := range modes {
		if fi, err := os.Stat(filepath.Join(root, path)); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, %v; want %v", path, fi.Mode().Perm(), err, want)
		}
	}

	// A second boot onto the same disk: a file that exists without overwrite fails it ...
	if err := applyConfig(root, lct.Payload(lct.File{Path: "/etc/plain", Contents: "new"}), false); err == nil || !strings.Contains(err.Error(), "overwrite") {
		t.Errorf("rewriting an existing file without overwrite: error = %v, want one about overwrite", err)
	}
	// ... overwrite replaces it, and so does an in-place update (force).
	if err := applyConfig(root, lct.Payload(lct.File{Path: "/etc/plain", Contents: "new", Overwrite: true}), false); err != nil {
		t.Fatal(err)
	}
	if err := applyConfig(root, lct.Payload(lct.File{Path: "/etc/secret", Contents: "newer"}), true); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{"etc/plain": "new", "etc/secret": "newer"} {
		if got, _ := os.ReadFile(filepath.Join(root, path)); string(got) != want {
			t.Errorf("%s = %q, want %q", path, got, want)
		}
	}
}

func TestNodeMaySetLabel_FollowsNodeRestriction(t *testing.T) {
	for label, want := range map[string]bool{
		"pool":                                     true,
		"example.com/team":                         true,
		"kubernetes.io/hostname":                   true,
		"node.kubernetes.io/instance-type":         true,
		"topology.kubernetes.io/zone":              true,
		"foo.node.kubernetes.io/bar":               true,
		"kubelet.kubernetes.io/x":                  true,
		"node-role.kubernetes.io/worker":           false,
		"kubernetes.io/role":                       false,
		"node-restriction.kubernetes.io/a":         false,
		"example.node-restriction.kubernetes.io/a": false,
		"k8s.io/anything":                          false,
	} {
		if got := nodeMaySetLabel(label); got != want {
			t.Errorf("nodeMaySetLabel(%q) = %v, want %v", label, got, want)
		}
	}
}

func TestLocalcloudtestPaths_AreTheKubeletPaths(t *testing.T) {
	if lct.PathBootstrapKubeconfig != PathBootstrapKubeconfig || lct.PathKubeletConfig != PathKubeletConfig || lct.PathKubeletCA != PathKubeletCA {
		t.Fatal("localcloudtest writes the kubelet files elsewhere than the machine reads them")
	}
}

// A link a config document makes, whatever its target, names a place inside the machine:
// an in-place update writing a file through it lands under the machine's root, never in
// the host directory the target climbs to (".." stops at the machine's "/").
func TestApplyConfig_ALinkNeverLeadsOutOfTheMachine(t *testing.T) {
	base := t.TempDir()
	root, outside := filepath.Join(base, "machine", "root"), filepath.Join(base, "host")
	if err := os.MkdirAll(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	climb := strings.Repeat("../", 12) + strings.TrimPrefix(outside, "/")
	boot := lct.Payload(lct.File{Path: "/etc/kubernetes/kubelet.json", Contents: "{}"})
	boot.Storage.Directories = []igntypes.Directory{{Node: igntypes.Node{Path: "/var/host"}}}
	boot.Storage.Links = []igntypes.Link{
		{Node: igntypes.Node{Path: "/etc/relative"}, LinkEmbedded1: igntypes.LinkEmbedded1{Target: new(climb)}},
		{Node: igntypes.Node{Path: "/etc/absolute"}, LinkEmbedded1: igntypes.LinkEmbedded1{Target: new(outside)}},
		{Node: igntypes.Node{Path: "/etc/kube"}, LinkEmbedded1: igntypes.LinkEmbedded1{Target: new("/etc/kubernetes")}},
	}
	if err := applyConfig(root, boot, false); err != nil {
		t.Fatal(err)
	}
	// Inside the machine the links resolve as on a machine.
	if got, err := os.ReadFile(filepath.Join(root, "etc", "kube", "kubelet.json")); err != nil || string(got) != "{}" {
		t.Errorf("/etc/kube/kubelet.json through the link = %q, %v", got, err)
	}
	for _, link := range []string{"relative", "absolute"} {
		target, err := os.Readlink(filepath.Join(root, "etc", link))
		if err != nil {
			t.Fatal(err)
		}
		if resolved := filepath.Join(root, "etc", target); !strings.HasPrefix(resolved, root+string(filepath.Separator)) {
			t.Errorf("/etc/%s -> %q resolves to %s, outside the machine's root %s", link, target, resolved, root)
		}
	}
	// An in-place update writes through them: with the target made, inside the machine.
	update := lct.Payload(
		lct.File{Path: "/etc/relative/pwned", Contents: "x"},
		lct.File{Path: "/etc/absolute/pwned", Contents: "x"},
	)
	update.Storage.Directories = []igntypes.Directory{{Node: igntypes.Node{Path: outside}}}
	if err := applyConfig(root, update, true); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(outside); len(left) > 0 {
		t.Errorf("the config wrote %d entries in the host directory %s: %v", len(left), outside, left)
	}
	if _, err := os.Stat(filepath.Join(root, strings.TrimPrefix(outside, "/"), "pwned")); err != nil {
		t.Errorf("the file written through the links is not inside the machine: %v", err)
	}
	// A link that leads out through a host-made link is refused, not followed.
	if err := os.Symlink(outside, filepath.Join(root, "var", "host", "out")); err != nil {
		t.Fatal(err)
	}
	err := applyConfig(root, lct.Payload(lct.File{Path: "/var/host/out/pwned", Contents: "x"}), true)
	if err == nil {
		t.Error("writing through a link out of the machine's root succeeded")
	}
	if left, _ := os.ReadDir(outside); len(left) > 0 {
		t.Errorf("a file landed in the host directory %s: %v", outside, left)
	}
}

// A compressed file bigger than a file may hold, once decompressed, fails the boot with a
// message, instead of being cut short on disk.
func TestApplyConfig_RefusesAFileTooBigOnceDecompressed(t *testing.T) {
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestSpeed)
	if _, err := zw.Write(make([]byte, maxFileSize+1)); err != nil {
		t.Fatal(err)
	}
	_ = zw.Close()
	compression := "gzip"
	cfg := lct.Payload()
	cfg.Storage.Files = []igntypes.File{{Node: igntypes.Node{Path: "/var/bomb"}, FileEmbedded1: igntypes.FileEmbedded1{Contents: igntypes.Resource{
		Source: new(dataurl.New(gz.Bytes(), "application/octet-stream").String()), Compression: &compression,
	}}}}
	root := t.TempDir()
	err := applyConfig(root, cfg, false)
	if err == nil || !strings.Contains(err.Error(), "/var/bomb") || !strings.Contains(err.Error(), "bytes") {
		t.Fatalf("applyConfig = %v, want an error naming the file and its size limit", err)
	}
	if _, err := os.Stat(filepath.Join(root, "var", "bomb")); err == nil {
		t.Error("the file was written cut short")
	}
}
