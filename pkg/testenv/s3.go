package testenv

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/hostplane/hostplane/pkg/release"
)

// SeaweedFSVersion is the SeaweedFS release whose S3 server the tests run
// (tools/seaweedfs/build.sh pins the same).
const SeaweedFSVersion = "v0.0.0-20261109003541-7506e5f91cd6"

// S3Env is a running S3-compatible store: a real SeaweedFS (master, volume server, filer and
// S3 gateway in one process) on loopback ports, its data under t.TempDir().
type S3Env struct {
	// URL is the S3 endpoint, http://127.0.0.1:<port>.
	URL string
	// AccessKey and SecretKey are the one identity the store accepts.
	AccessKey, SecretKey string

	cmd  *exec.Cmd
	done chan struct{}
}

// Weed returns the path of SeaweedFS's weed at SeaweedFSVersion: HOSTPLANE_WEED when set,
// else the one tools/seaweedfs/build.sh (make s3-tools, a prerequisite of make test) builds
// into ${HOSTPLANE_CACHE_DIR:-~/.cache/hostplane}. It fails the test when it is missing: the
// test has no fallback.
func Weed(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("HOSTPLANE_WEED"); p != "" {
		return p
	}
	p := filepath.Join(release.CacheDir(), "seaweedfs", SeaweedFSVersion, "weed")
	if fi, err := os.Stat(p); err != nil || fi.Mode()&0o111 == 0 {
		t.Fatalf("testenv: SeaweedFS %s is not built (%s): run tools/seaweedfs/build.sh (make s3-tools; several minutes cold on 2 cores)", SeaweedFSVersion, p)
	}
	return p
}

// S3 starts SeaweedFS with its S3 gateway and waits until the gateway answers a signed
// request and a volume server has joined (so a write can land). It stops at cleanup, or
// earlier with Stop; nothing is left running.
func S3(t testing.TB) *S3Env {
	t.Helper()
	bin := Weed(t)
	dir := t.TempDir()
	s := &S3Env{AccessKey: "HOSTPLANETEST", SecretKey: "hostplane-test-secret-key"}
	cfg, err := json.Marshal(map[string]any{"identities": []any{map[string]any{
		"name":        "hostplane",
		"credentials": []any{map[string]string{"accessKey": s.AccessKey, "secretKey": s.SecretKey}},
		"actions":     []string{"Admin", "Read", "Write", "List", "Tagging"},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(dir, "s3.json")
	if err := os.WriteFile(cfgFile, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	// weed binds the free ports it is given one server after another, over a second or more:
	// an outgoing connection of another process (whose local port comes from the same kernel
	// range) can take one meanwhile, and weed exits. It is then started again on new ports.
	for attempt := 1; ; attempt++ {
		data := filepath.Join(dir, fmt.Sprintf("data-%d", attempt))
		if err := os.MkdirAll(data, 0o700); err != nil {
			t.Fatal(err)
		}
		if s.start(t, bin, data, cfgFile) {
			return s
		}
		if attempt == 3 {
			t.Fatalf("testenv: weed exited before it was ready, %d times (its log is above)", attempt)
		}
		t.Logf("testenv: weed exited before it was ready (a port taken?); starting it again on other ports")
	}
}

// start runs weed with its data in data and waits until it is ready (true) or has exited.
func (s *S3Env) start(t testing.TB, bin, data, cfgFile string) bool {
	t.Helper()
	port := func() string {
		_, p, _ := net.SplitHostPort(freeLoopbackAddr(t))
		return p
	}
	s3Port, masterPort := port(), port()
	s.URL = "http://127.0.0.1:" + s3Port
	s.cmd = exec.Command(bin, "server",
		"-dir="+data, "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
		"-master.port="+masterPort, "-master.port.grpc="+port(), "-master.volumeSizeLimitMB=64",
		"-volume.port="+port(), "-volume.port.grpc="+port(), "-volume.max=16",
		"-filer", "-filer.port="+port(), "-filer.port.grpc="+port(),
		"-s3", "-s3.port="+s3Port, "-s3.port.grpc="+port(), "-s3.config="+cfgFile,
		"-s3.port.iceberg=0", "-s3.port.lance=0",
	)
	s.cmd.Stdout = testWriter(t)
	s.cmd.Stderr = s.cmd.Stdout
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	s.done = make(chan struct{})
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("testenv: start weed: %v", err)
	}
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(s.cmd, s.done)
	t.Cleanup(s.Stop)
	// An unsigned request is refused (403) once the gateway serves; the master's status
	// names a volume server once one has joined.
	exited := false
	Eventually(t, time.Minute, func() bool {
		select {
		case <-s.done:
			exited = true
			return true
		default:
		}
		resp, err := http.Get(s.URL + "/")
		if err != nil {
			return false
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			return false
		}
		return volumesJoined(masterPort)
	}, "SeaweedFS's S3 gateway on %s never became ready", s.URL)
	return !exited
}

// volumesJoined reports whether the master on port has a volume server.
func volumesJoined(port string) bool {
	resp, err := http.Get("http://127.0.0.1:" + port + "/dir/status")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var st struct {
		Topology struct {
			Max int `json:"Max"`
		} `json:"Topology"`
	}
	return json.NewDecoder(resp.Body).Decode(&st) == nil && st.Topology.Max > 0
}

// Stop kills the store and waits for it to exit.
func (s *S3Env) Stop() {
	if s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
	}
	<-s.done
}
