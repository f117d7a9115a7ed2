package ignitiond

import (
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hostplane/hostplane/pkg/release"
)

// PathNodeBinary is a cluster listener's route to the node binaries of a release: {binary}
// (one of release.NodeBinaries: kubelet, kube-proxy) of release {version} ("v1.34.4"), for a
// real node's Ignition to fetch with its bearer token and check against the SHA-512 its payload
// names.
const PathNodeBinary = "/releases/{version}/{binary}"

// nodeBinaryURL is where a machine of the cluster whose listener is at endpoint fetches binary
// of release version.
func nodeBinaryURL(endpoint, version, binary string) string {
	return "https://" + endpoint + "/releases/v" + strings.TrimPrefix(version, "v") + "/" + binary
}

// nodeBinaries finds the releases' node binaries in the release cache and hashes each file
// once per version of it (size and modification time).
type nodeBinaries struct {
	mu   sync.Mutex
	sums map[string]fileSum // path → its SHA-512
}

type fileSum struct {
	size   int64
	mod    time.Time
	sha512 string
}

func newNodeBinaries() *nodeBinaries { return &nodeBinaries{sums: map[string]fileSum{}} }

// find returns the path and hex SHA-512 of version's binary. An unknown release wraps
// release.ErrUnknownRelease, an unknown binary release.ErrUnknownComponent, a binary not built
// release.ErrBinaryMissing (which says how to build it).
func (k *nodeBinaries) find(version, binary string) (string, string, error) {
	if !slices.Contains(release.NodeBinaries(), binary) {
		return "", "", fmt.Errorf("%w %q: a node binary is one of %s", release.ErrUnknownComponent, binary,
			strings.Join(release.NodeBinaries(), ", "))
	}
	rel, err := release.Lookup(strings.TrimPrefix(version, "v"))
	if err != nil {
		return "", "", err
	}
	path, err := rel.Binary(binary)
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

// serveNodeBinary answers GET /releases/{version}/{binary} on cluster's listener: the binary,
// to a valid token of the cluster only (401 with an empty body otherwise, as /ignition), 404
// for a binary that is not a node binary or is not built here.
func (d *Daemon) serveNodeBinary(w http.ResponseWriter, r *http.Request, cluster string) {
	log := d.log.With("cluster", cluster, "remote", r.RemoteAddr)
	_, result, ok := d.authenticate(r, cluster)
	if !ok {
		return
	}
	if result != TokenCurrent && result != TokenPrevious {
		unauthorized(w)
		return
	}
	binary := r.PathValue("binary")
	path, _, err := d.binaries.find(r.PathValue("version"), binary)
	if err != nil {
		log.Warn("a machine asked for a node binary this host does not have", "version", r.PathValue("version"), "binary", binary, "err", err)
		http.Error(w, "no such node binary of that release here", http.StatusNotFound)
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
	http.ServeContent(w, r, binary, fi.ModTime(), f)
	log.Debug("served a node binary", "version", r.PathValue("version"), "binary", binary, "bytes", fi.Size())
}
