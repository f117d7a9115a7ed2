package localcloud

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	igntypes "github.com/coreos/ignition/v2/config/v3_5/types"
	"github.com/vincent-petithory/dataurl"

	"github.com/hostplane/hostplane/services/localcloud/ignitionfs"
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
	// A config document's merge reference (to a server this test counts the requests of).
	remote := lct.NewIgnitionServer(t)
	remote.Set(t, "doc", lct.Payload())
	withRef := lct.NodePayload(t, []byte(testKubeconfig), srv.CAPEM, kubelet)
	withRef.Ignition.Config.Merge = []igntypes.Resource{{Source: new(remote.URL)}}
	withRef.Ignition.Security.TLS.CertificateAuthorities = []igntypes.Resource{{Source: new(dataurl.New(remote.CAPEM, "text/plain").String())}}
	srv.Set(t, "with-ref", withRef)
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
		{name: "fetched config references another config", userData: srv.Stub(t, "with-ref"), wantErr: "simulated machine fetches only", invalid: true},
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
				err = ignitionfs.Apply(root, cfg, false)
			}
			if err == nil {
				nc, err = readNodeConfig(root)
			}
			if n := remote.Requests.Load(); n != 0 {
				t.Errorf("the machine fetched a config document's reference (%d requests)", n)
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
