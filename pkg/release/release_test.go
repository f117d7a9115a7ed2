package release

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hostplane/hostplane/pkg/api"
)

func TestVersions_AreSortedOldestFirst(t *testing.T) {
	got := Versions()
	want := []string{"1.33.13", "1.34.4"}
	if !slices.Equal(got, want) {
		t.Fatalf("Versions() = %v, want %v", got, want)
	}
	if l := Latest(); l.Version != "1.34.4" {
		t.Fatalf("Latest().Version = %q, want 1.34.4", l.Version)
	}
}

func TestLookup(t *testing.T) {
	tests := []struct {
		name, version string
		want          string // Version, or "" for an error
		wantEtcdImage string
	}{
		{"known", "1.34.4", "1.34.4", "registry.k8s.io/etcd:3.6.5-0"},
		{"leading v", "v1.33.13", "1.33.13", "registry.k8s.io/etcd:3.5.24-0"},
		{"unknown patch", "1.33.7", "", ""},
		{"minor only", "1.34", "", ""},
		{"empty", "", "", ""},
		{"garbage", "latest", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Lookup(tt.version)
			if tt.want == "" {
				if err == nil {
					t.Fatalf("Lookup(%q) = %+v, want an error", tt.version, r)
				}
				if c := api.ErrorCode(err); c != api.CodeInvalid {
					t.Fatalf("code = %s, want %s", c, api.CodeInvalid)
				}
				for _, v := range Versions() {
					if !strings.Contains(err.Error(), v) {
						t.Errorf("error %q does not list known version %s", err, v)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Lookup(%q): %v", tt.version, err)
			}
			if r.Version != tt.want {
				t.Errorf("Version = %q, want %q", r.Version, tt.want)
			}
			if r.EtcdVersion != "3.6.16" {
				t.Errorf("EtcdVersion = %q, want 3.6.16", r.EtcdVersion)
			}
			if got := r.Images[Etcd]; got != tt.wantEtcdImage {
				t.Errorf("etcd image = %q, want %q", got, tt.wantEtcdImage)
			}
			for _, c := range []string{KubeAPIServer, KubeControllerManager, KubeScheduler} {
				if want := "registry.k8s.io/" + c + ":v" + tt.want; r.Images[c] != want {
					t.Errorf("image of %s = %q, want %q", c, r.Images[c], want)
				}
			}
		})
	}
}

func TestLookup_ReturnsACopy(t *testing.T) {
	r, _ := Lookup("1.34.4")
	r.Images[KubeAPIServer] = "evil"
	again, _ := Lookup("1.34.4")
	if again.Images[KubeAPIServer] == "evil" {
		t.Fatal("mutating a looked-up release changed the catalogue")
	}
}

func TestMinor(t *testing.T) {
	if got := Latest().Minor(); got != "1.34" {
		t.Fatalf("Minor() = %q, want 1.34", got)
	}
}

func TestCacheDir(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("HOSTPLANE_CACHE_DIR", dir)
	if got := CacheDir(); got != dir {
		t.Fatalf("CacheDir() = %q, want %q", got, dir)
	}
	t.Setenv("HOSTPLANE_CACHE_DIR", "")
	t.Setenv("HOME", dir)
	if got, want := CacheDir(), filepath.Join(dir, ".cache", "hostplane"); got != want {
		t.Fatalf("CacheDir() = %q, want %q", got, want)
	}
}

func TestBinary(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("HOSTPLANE_CACHE_DIR", cache)
	r, _ := Lookup("1.34.4")
	write := func(rel string, mode os.FileMode) {
		p := filepath.Join(cache, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("#!/bin/true\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("etcd/v3.6.16/etcd", 0o755)
	write("releases/v1.34.4/kube-apiserver", 0o755)
	write("releases/v1.34.4/kube-scheduler", 0o644) // not executable

	tests := []struct {
		component string
		want      string // path, or "" for an error
		wantErr   error
	}{
		{Etcd, filepath.Join(cache, "etcd/v3.6.16/etcd"), nil},
		{KubeAPIServer, filepath.Join(cache, "releases/v1.34.4/kube-apiserver"), nil},
		{KubeControllerManager, "", ErrBinaryMissing},
		{KubeScheduler, "", ErrBinaryMissing},
		{Kubelet, "", ErrBinaryMissing},
		{KubeProxy, "", ErrBinaryMissing},
		{"kubectl", "", ErrUnknownComponent},
	}
	for _, tt := range tests {
		t.Run(tt.component, func(t *testing.T) {
			got, err := r.Binary(tt.component)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Binary(%q) error = %v, want %v", tt.component, err, tt.wantErr)
				}
				how := "make k8s-bins"
				if tt.component == Kubelet || tt.component == KubeProxy {
					how = "make kubelet"
				}
				if tt.wantErr == ErrBinaryMissing && !strings.Contains(err.Error(), how) {
					t.Errorf("error %q does not say how to build the binary", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Binary(%q): %v", tt.component, err)
			}
			if got != tt.want || !filepath.IsAbs(got) {
				t.Errorf("Binary(%q) = %q, want %q", tt.component, got, tt.want)
			}
		})
	}
}

func TestCheckUpgrade(t *testing.T) {
	tests := []struct {
		name, from, to string
		ok             bool
		wantInMessage  string
	}{
		{"same version", "1.34.4", "1.34.4", true, ""},
		{"patch upgrade", "1.34.1", "1.34.4", true, ""},
		{"next minor", "1.33.13", "1.34.4", true, ""},
		{"next minor from an uncatalogued patch", "1.33.7", "1.34.4", true, ""},
		{"leading v", "v1.33.13", "v1.34.4", true, ""},
		{"downgrade minor", "1.34.4", "1.33.13", false, "downgrade"},
		{"downgrade patch", "1.34.5", "1.34.4", false, "downgrade"},
		{"skips a minor", "1.32.9", "1.34.4", false, "upgrade to 1.33 first"},
		{"major change", "0.34.0", "1.34.4", false, "major"},
		{"unknown target", "1.34.4", "1.35.0", false, "unknown release"},
		{"bad source", "one.two", "1.34.4", false, "not a version"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckUpgrade(tt.from, tt.to)
			if tt.ok {
				if err != nil {
					t.Fatalf("CheckUpgrade(%q, %q): %v", tt.from, tt.to, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("CheckUpgrade(%q, %q) = nil, want an error", tt.from, tt.to)
			}
			if c := api.ErrorCode(err); c != api.CodeInvalid {
				t.Errorf("code = %s, want %s", c, api.CodeInvalid)
			}
			if !strings.Contains(err.Error(), tt.wantInMessage) {
				t.Errorf("error %q does not contain %q", err, tt.wantInMessage)
			}
		})
	}
}
