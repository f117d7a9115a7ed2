package ignitiond

import (
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/hostplane/hostplane/pkg/release"
)

// PathKubelet is a cluster listener's kubelet route: the kubelet binary of release
// {version} ("v1.34.4"), for a real node's Ignition to fetch with its bearer token and check
// against the SHA-512 its payload names.
const PathKubelet = "/releases/{version}/kubelet"

// kubeletURL is where a machine of the cluster whose listener is at endpoint fetches the
// kubelet of release version.
func kubeletURL(endpoint, version string) string {
	return "https://" + endpoint + "/releases/v" + strings.TrimPrefix(version, "v") + "/kubelet"
}

// kubelets finds the releases' kubelets in the release cache and hashes each file once per
// version of it (size and modification time).
type kubelets struct {
	mu   sync.Mutex
	sums map[string]fileSum // path → its SHA-512
}

type fileSum struct {
	size   int64
	mod    time.Time
	sha512 string
}

func newKubelets() *kubelets { return &kubelets{sums: map[string]fileSum{}} }

// find returns the path and hex SHA-512 of version's kubelet. An unknown release wraps
// release.ErrUnknownRelease, a kubelet not built release.ErrBinaryMissing (which says how
// to build it).
func (k *kubelets) find(version string) (string, string, error) {
	rel, err := release.Lookup(strings.TrimPrefix(version, "v"))
	if err != nil {
		return "", "", err
	}
	path, err := rel.Binary(release.Kubelet)
	if err != nil {
		return "", "", err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return "", "", err
	}
	k.mu.Lock()
	s, ok := k.sums[path]
	k.mu.Unlock()
	if ok && s.size == fi.Size() && s.mod.Equal(fi.ModTime()) {
		return path, s.sha512, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	h := sha512.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", "", fmt.Errorf("hash %s: %w", path, err)
	}
	s = fileSum{size: fi.Size(), mod: fi.ModTime(), sha512: hex.EncodeToString(h.Sum(nil))}
	k.mu.Lock()
	k.sums[path] = s
	k.mu.Unlock()
	return path, s.sha512, nil
}

// serveKubelet answers GET /releases/{version}/kubelet on cluster's listener: the binary,
// to a valid token of the cluster only (401 with an empty body otherwise, as /ignition), 404
// for a release whose kubelet is not built here.
func (d *Daemon) serveKubelet(w http.ResponseWriter, r *http.Request, cluster string) {
	log := d.log.With("cluster", cluster, "remote", r.RemoteAddr)
	_, result, ok := d.authenticate(r, cluster)
	if !ok {
		return
	}
	if result != TokenCurrent && result != TokenPrevious {
		unauthorized(w)
		return
	}
	path, _, err := d.kubelets.find(r.PathValue("version"))
	if err != nil {
		log.Warn("a machine asked for a kubelet this host does not have", "version", r.PathValue("version"), "err", err)
		http.Error(w, "no kubelet of that release here", http.StatusNotFound)
		return
	}
	f, err := os.Open(path)
	if err != nil {
		http.Error(w, "", http.StatusInternalServerError)
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		http.Error(w, "", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	http.ServeContent(w, r, "kubelet", fi.ModTime(), f)
	log.Debug("served a kubelet", "version", r.PathValue("version"), "bytes", fi.Size())
}
