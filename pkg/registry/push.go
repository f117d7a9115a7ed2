package registry

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path"
	"runtime"
	"slices"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Image is a FROM-scratch image of one layer: host files copied in, and how it starts.
type Image struct {
	// Repo and Tag name it in the registry ("hostplane/echo", "1").
	Repo, Tag string
	// Files maps a path in the image ("/echo") to the host file copied there (mode 0755).
	Files      map[string]string
	Entrypoint []string
}

// Ref is the image's full name in r ("<host:port>/hostplane/echo:1").
func (r *Registry) Ref(repo, tag string) string { return r.addr + "/" + repo + ":" + tag }

// Push builds img and pushes it to r as its user, and returns its digest.
func (r *Registry) Push(ctx context.Context, img Image) (string, error) {
	layerTar, err := tarFiles(img.Files)
	if err != nil {
		return "", err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layerTar)), nil })
	if err != nil {
		return "", err
	}
	image, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return "", err
	}
	cf, err := image.ConfigFile()
	if err != nil {
		return "", err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config.Entrypoint = img.Entrypoint
	if image, err = mutate.ConfigFile(image, cf); err != nil {
		return "", err
	}
	ref, err := name.ParseReference(r.Ref(img.Repo, img.Tag))
	if err != nil {
		return "", err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(r.ca)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	user, pass := r.Credentials()
	if err := remote.Write(ref, image, remote.WithContext(ctx), remote.WithTransport(tr),
		remote.WithAuth(&authn.Basic{Username: user, Password: pass})); err != nil {
		return "", fmt.Errorf("push %s: %w", ref, err)
	}
	d, err := image.Digest()
	if err != nil {
		return "", err
	}
	return d.String(), nil
}

// tarFiles is a layer holding files (path in the image → host file), mode 0755, root-owned.
func tarFiles(files map[string]string) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	for _, dst := range sortedKeys(files) {
		for d := path.Dir(dst); d != "/" && d != "." && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d[1:] + "/", Mode: 0o755}); err != nil {
				return nil, err
			}
		}
		b, err := os.ReadFile(files[dst])
		if err != nil {
			return nil, err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: dst[1:], Mode: 0o755, Size: int64(len(b))}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(b); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func sortedKeys(m map[string]string) []string {
	return slices.Sorted(maps.Keys(m))
}
