package mgmtcluster

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"defaults", Config{}, true},
		{"three nodes", Config{Nodes: 3, Name: "t1"}, true},
		{"long name", Config{Name: "toolong"}, false},
		{"upper case", Config{Name: "Hpm"}, false},
		{"too many nodes", Config{Nodes: 9}, false},
		{"relative dir", Config{Dir: "x"}, true}, // made absolute
		{"root dir", Config{Dir: "/"}, false},
		{"short grace", Config{NodeMonitorGracePeriod: 1}, false},
		{"dir too long for the nodes' sockets", Config{Dir: "/" + strings.Repeat("d", 71)}, false},
		{"dir just short enough", Config{Dir: "/" + strings.Repeat("d", 70)}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.ok != (err == nil) {
				t.Fatalf("Validate: %v, want ok=%v", err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("error %v is not ErrInvalidConfig", err)
			}
		})
	}
	if d := (Config{Name: "abc"}).withDefaults().Dir; d != "/var/lib/hostplane-mgmtcluster/abc" {
		t.Errorf("default Dir %q", d)
	}
}

func TestNames(t *testing.T) {
	for n, want := range map[string]bool{
		"hpm-sw": true, "hpm-n1": true, "hpm-n12": true,
		"hpm-nx": false, "hpm-n": false, "hpmx-n1": false, "cni-1234": false, "hpm-sw2": false,
	} {
		if got := isOurNetns("hpm", n); got != want {
			t.Errorf("isOurNetns(hpm, %q) = %v, want %v", n, got, want)
		}
	}
	if nodeIP(2) != "10.231.0.12" || podCIDR(2) != "10.232.2.0/24" || hostLink("hpm") != "hpm0" {
		t.Errorf("addresses: %s %s %s", nodeIP(2), podCIDR(2), hostLink("hpm"))
	}
}

// The archive is what `docker save` writes: a manifest naming the tag, a config whose diff ID
// is the layer's digest, and the layer with the file at its path.
func TestImage_WriteArchive(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "prog")
	if err := os.WriteFile(bin, []byte("#!binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(dir, "img.tar")
	img := Image{Ref: "hostplane.local/x:1", Files: []ImageFile{{Path: "/usr/bin/prog", Source: bin}}, Entrypoint: []string{"/usr/bin/prog"}}
	if err := img.WriteArchive(archive); err != nil {
		t.Fatal(err)
	}
	files := readTar(t, archive)
	var manifest []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	if err := json.Unmarshal(files["manifest.json"], &manifest); err != nil || len(manifest) != 1 {
		t.Fatalf("manifest.json: %v %s", err, files["manifest.json"])
	}
	m := manifest[0]
	if len(m.RepoTags) != 1 || m.RepoTags[0] != img.Ref || len(m.Layers) != 1 {
		t.Fatalf("manifest %+v", m)
	}
	var config struct {
		Config struct{ Entrypoint []string }
		RootFS struct {
			DiffIDs []string `json:"diff_ids"`
		} `json:"rootfs"`
	}
	if err := json.Unmarshal(files[m.Config], &config); err != nil {
		t.Fatal(err)
	}
	layer := files[m.Layers[0]]
	sum := sha256.Sum256(layer)
	if len(config.RootFS.DiffIDs) != 1 || config.RootFS.DiffIDs[0] != "sha256:"+hex.EncodeToString(sum[:]) {
		t.Errorf("diff IDs %v, layer digest %x", config.RootFS.DiffIDs, sum)
	}
	if strings.Join(config.Config.Entrypoint, " ") != "/usr/bin/prog" {
		t.Errorf("entrypoint %v", config.Config.Entrypoint)
	}
	layerPath := filepath.Join(dir, "layer.tar")
	if err := os.WriteFile(layerPath, layer, 0o644); err != nil {
		t.Fatal(err)
	}
	inLayer := readTar(t, layerPath)
	if string(inLayer["usr/bin/prog"]) != "#!binary" {
		t.Errorf("layer files: %v", keys(inLayer))
	}
	if _, ok := inLayer["usr/"]; !ok {
		t.Errorf("layer lacks the parent directories: %v", keys(inLayer))
	}
}

func readTar(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = b
	}
}

func keys(m map[string][]byte) []string { return slices.Sorted(maps.Keys(m)) }
