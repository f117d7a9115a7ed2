package mgmtcluster

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/hostplane/hostplane/pkg/release"
)

// ImageFile is one file of an image's only layer.
type ImageFile struct {
	// Path inside the image, absolute ("/pause").
	Path string
	// Source is the host file copied in.
	Source string
	// Mode of the file in the image; default 0o755.
	Mode int64
}

// Image describes a FROM-scratch image: one layer of files and how to start it.
type Image struct {
	// Ref is the image's name, for example "hostplane.local/podserver:1". Pods name it with
	// imagePullPolicy: Never.
	Ref        string
	Files      []ImageFile
	Entrypoint []string
	Env        []string
}

// WriteArchive writes img as a docker archive (the format of `docker save`, which
// `ctr images import` reads) to path.
func (img Image) WriteArchive(path string) error {
	if img.Ref == "" || !strings.Contains(img.Ref, ":") {
		return fmt.Errorf("image ref %q needs a name and a tag", img.Ref)
	}
	dir, err := os.MkdirTemp(filepath.Dir(path), ".image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	layerPath := filepath.Join(dir, "layer.tar")
	layerDigest, err := writeLayer(layerPath, img.Files)
	if err != nil {
		return err
	}
	config := map[string]any{
		"architecture": runtime.GOARCH,
		"os":           "linux",
		"config": map[string]any{
			"Entrypoint": img.Entrypoint,
			"Env":        img.Env,
		},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + layerDigest}},
	}
	configJSON, err := json.Marshal(config)
	if err != nil {
		return err
	}
	configSum := sha256.Sum256(configJSON)
	configName := hex.EncodeToString(configSum[:]) + ".json"
	layerName := layerDigest + "/layer.tar"
	manifest, err := json.Marshal([]map[string]any{{
		"Config":   configName,
		"RepoTags": []string{img.Ref},
		"Layers":   []string{layerName},
	}})
	if err != nil {
		return err
	}

	out, err := os.Create(path)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(out)
	for _, f := range []struct {
		name string
		data []byte
	}{{"manifest.json", manifest}, {configName, configJSON}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.data)), Typeflag: tar.TypeReg}); err != nil {
			out.Close()
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			out.Close()
			return err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Name: layerDigest + "/", Mode: 0o755, Typeflag: tar.TypeDir}); err != nil {
		out.Close()
		return err
	}
	if err := copyIntoTar(tw, layerName, layerPath, 0o644); err != nil {
		out.Close()
		return err
	}
	if err := tw.Close(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// writeLayer writes the layer tar (with the parent directories of every file) and returns
// its sha256, the image's diff ID.
func writeLayer(path string, files []ImageFile) (string, error) {
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	tw := tar.NewWriter(io.MultiWriter(f, h))
	dirs := map[string]bool{}
	for _, file := range files {
		rel := strings.TrimPrefix(filepath.Clean(file.Path), "/")
		if rel == "" || rel == "." {
			return "", fmt.Errorf("image file path %q", file.Path)
		}
		var parents []string
		for d := filepath.Dir(rel); d != "."; d = filepath.Dir(d) {
			parents = append([]string{d}, parents...)
		}
		for _, d := range parents {
			if !dirs[d] {
				dirs[d] = true
				if err := tw.WriteHeader(&tar.Header{Name: d + "/", Mode: 0o755, Typeflag: tar.TypeDir}); err != nil {
					return "", err
				}
			}
		}
		mode := file.Mode
		if mode == 0 {
			mode = 0o755
		}
		if err := copyIntoTar(tw, rel, file.Source, mode); err != nil {
			return "", err
		}
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func copyIntoTar(tw *tar.Writer, name, source string, mode int64) error {
	src, err := os.Open(source)
	if err != nil {
		return err
	}
	defer src.Close()
	fi, err := src.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: fi.Size(), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	_, err = io.Copy(tw, src)
	return err
}

// BuildStatic builds the Go main package in dir (a directory inside a module, or with its own
// go.mod) into out as a static binary (CGO_ENABLED=0). env is added to the environment, for
// example "GOWORK=off".
func BuildStatic(ctx context.Context, dir, out string, env ...string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, ".")
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "CGO_ENABLED=0"), env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build in %s: %w: %s", dir, err, strings.TrimSpace(string(b)))
	}
	return nil
}

// pauseImage is the sandbox image every pod starts with.
const pauseImage = "hostplane.local/pause:1"

// pauseSource is the sandbox program: it holds the pod's namespaces until it is told to stop.
const pauseSource = `package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
}
`

// buildPause writes the pause image's archive into dir and returns its path.
func buildPause(ctx context.Context, dir string) (string, error) {
	src := filepath.Join(dir, "pause-src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte("module pause\n\ngo 1.24\n"), 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(src, "main.go"), []byte(pauseSource), 0o644); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "pause")
	if err := BuildStatic(ctx, src, bin, "GOWORK=off", "GOFLAGS=-mod=mod"); err != nil {
		return "", err
	}
	archive := filepath.Join(dir, "pause.tar")
	img := Image{Ref: pauseImage, Files: []ImageFile{{Path: "/pause", Source: bin}}, Entrypoint: []string{"/pause"}}
	return archive, img.WriteArchive(archive)
}

// ReleaseImages packs rel's cached binaries (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler) into FROM-scratch images named as the release names them (rel.Images), so
// componentd's kubernetes runtime finds them without a pull, and returns their archives,
// written into dir.
func ReleaseImages(rel release.Release, dir string) ([]string, error) {
	var out []string
	for _, comp := range release.Components() {
		bin, err := rel.Binary(comp)
		if err != nil {
			return nil, err
		}
		img := Image{
			Ref:   rel.Images[comp],
			Files: []ImageFile{{Path: "/usr/local/bin/" + comp, Source: bin}},
			Env:   []string{"PATH=/usr/local/bin"},
		}
		archive := filepath.Join(dir, comp+".tar")
		if err := img.WriteArchive(archive); err != nil {
			return nil, err
		}
		out = append(out, archive)
	}
	return out, nil
}
