package ignitionfs

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	igntypes "github.com/coreos/ignition/v2/config/v3_5/types"
	"github.com/vincent-petithory/dataurl"

	lct "github.com/hostplane/hostplane/services/localcloud/localcloudtest"
)

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
	if err := Apply(root, cfg, false); err != nil {
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
	if err := Apply(root, lct.Payload(lct.File{Path: "/etc/plain", Contents: "new"}), false); err == nil || !strings.Contains(err.Error(), "overwrite") {
		t.Errorf("rewriting an existing file without overwrite: error = %v, want one about overwrite", err)
	}
	// ... overwrite replaces it, and so does an in-place update (force).
	if err := Apply(root, lct.Payload(lct.File{Path: "/etc/plain", Contents: "new", Overwrite: true}), false); err != nil {
		t.Fatal(err)
	}
	if err := Apply(root, lct.Payload(lct.File{Path: "/etc/secret", Contents: "newer"}), true); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{"etc/plain": "new", "etc/secret": "newer"} {
		if got, _ := os.ReadFile(filepath.Join(root, path)); string(got) != want {
			t.Errorf("%s = %q, want %q", path, got, want)
		}
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
	if err := Apply(root, boot, false); err != nil {
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
	if err := Apply(root, update, true); err != nil {
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
	err := Apply(root, lct.Payload(lct.File{Path: "/var/host/out/pwned", Contents: "x"}), true)
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
	if _, err := zw.Write(make([]byte, MaxFileSize+1)); err != nil {
		t.Fatal(err)
	}
	_ = zw.Close()
	compression := "gzip"
	cfg := lct.Payload()
	cfg.Storage.Files = []igntypes.File{{Node: igntypes.Node{Path: "/var/bomb"}, FileEmbedded1: igntypes.FileEmbedded1{Contents: igntypes.Resource{
		Source: new(dataurl.New(gz.Bytes(), "application/octet-stream").String()), Compression: &compression,
	}}}}
	root := t.TempDir()
	err := Apply(root, cfg, false)
	if err == nil || !strings.Contains(err.Error(), "/var/bomb") || !strings.Contains(err.Error(), "bytes") {
		t.Fatalf("applyConfig = %v, want an error naming the file and its size limit", err)
	}
	if _, err := os.Stat(filepath.Join(root, "var", "bomb")); err == nil {
		t.Error("the file was written cut short")
	}
}

// FuzzApply: whatever paths and link targets a config names, and whatever an in-place update
// then writes through them, nothing is created outside the machine's root, and every link
// it made names a place inside it.
func FuzzApply(f *testing.F) {
	for _, s := range [][3]string{
		{"/etc/l", "../../../../host", "/etc/l/x"},
		{"/etc/l", "/", "/etc/l/etc/passwd"},
		{"/a/b", "../../..", "/a/b/c"},
		{"/", "..", "/x"},
		{"/etc/kube", "/etc/kubernetes", "/etc/kube/kubelet.json"},
		{"/l", "l", "/l/x"},
		{"/../../l", "./../../../", "/../../l/../x"},
		{"/d/./l", "d/../../..", "//d//l/f"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, linkPath, target, filePath string) {
		base := t.TempDir()
		root, host := filepath.Join(base, "root"), filepath.Join(base, "host")
		if err := os.Mkdir(host, 0o755); err != nil {
			t.Fatal(err)
		}
		cfg := igntypes.Config{Ignition: igntypes.Ignition{Version: igntypes.MaxVersion.String()}}
		cfg.Storage.Links = []igntypes.Link{{Node: igntypes.Node{Path: linkPath}, LinkEmbedded1: igntypes.LinkEmbedded1{Target: new(target)}}}
		_ = Apply(root, cfg, false)
		update := lct.Payload(lct.File{Path: filePath, Contents: "x"})
		update.Storage.Directories = []igntypes.Directory{{Node: igntypes.Node{Path: filePath + "/d"}}}
		_ = Apply(root, update, true)

		if entries, _ := os.ReadDir(base); len(entries) != 2 {
			t.Fatalf("link %q -> %q, file %q: %v beside the machine's root and the host directory", linkPath, target, filePath, entries)
		}
		if entries, _ := os.ReadDir(host); len(entries) != 0 {
			t.Fatalf("link %q -> %q, file %q: wrote %v in the host directory", linkPath, target, filePath, entries)
		}
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.Type()&os.ModeSymlink == 0 {
				return nil
			}
			to, err := os.Readlink(p)
			if err != nil {
				t.Fatal(err)
			}
			if filepath.IsAbs(to) {
				t.Fatalf("link %q -> %q: %s is absolute (%s), so it names the host's %s", linkPath, target, p, to, to)
			}
			if r := filepath.Join(filepath.Dir(p), to); r != root && !strings.HasPrefix(r, root+string(filepath.Separator)) {
				t.Fatalf("link %q -> %q: %s -> %s resolves to %s, outside %s", linkPath, target, p, to, r, root)
			}
			return nil
		})
	})
}
