package localkube

import (
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"time"

	"github.com/hostplane/hostplane/pkg/process"
	"github.com/hostplane/hostplane/pkg/release"
)

// Config describes a local etcd + kube-apiserver.
type Config struct {
	// Dir holds the cluster's state: certificates, etcd data, logs, ports. It is reused on
	// restart. Required.
	Dir string
	// Release whose binaries run; default release.Latest().
	Release release.Release
	// Host is the IP kube-apiserver binds to and advertises; default 127.0.0.1. etcd always
	// listens on 127.0.0.1 only.
	Host string
	// Ports; 0 picks a free port once and persists it in Dir, so a restart resumes on the
	// same port.
	APIServerPort, EtcdClientPort, EtcdPeerPort int
	// Supervisor runs the processes. Required.
	Supervisor *process.Supervisor
	// Name prefixes the supervised processes' names ("<Name>-etcd", "<Name>-kube-apiserver")
	// so several clusters can share a Supervisor; default "localkube".
	Name string
	// ExtraAPIServerArgs are appended to kube-apiserver's command line (a later flag wins).
	ExtraAPIServerArgs []string
	// Controllers, when not empty, are the kube-controller-manager controllers that run
	// beside kube-apiserver (ManagementControllers for a management cluster); none run
	// when it is empty.
	Controllers []string
	// ExtraControllerManagerArgs are appended to kube-controller-manager's command line when
	// Controllers is not empty (a later flag wins), for example node-monitor settings.
	ExtraControllerManagerArgs []string
	// ReadyTimeout bounds the wait for each component to become ready; default 2 minutes.
	ReadyTimeout time.Duration
	// Log; default slog.Default().
	Log *slog.Logger
}

// ManagementControllers are the kube-controller-manager controllers a management cluster
// needs. The garbage collector: Cluster API leans on owner references (an infrastructure
// machine whose Machine was never created, because its controller died in between, is owned
// by its MachineSet and must go with it). The namespace controller: a deleted cluster's
// namespace is emptied and removed instead of staying Terminating.
var ManagementControllers = []string{"garbagecollector", "namespace"}

const (
	defaultName         = "localkube"
	defaultHost         = "127.0.0.1"
	defaultReadyTimeout = 2 * time.Minute
)

func (c Config) withDefaults() Config {
	if c.Release.Version == "" {
		c.Release = release.Latest()
	}
	if c.Host == "" {
		c.Host = defaultHost
	}
	if c.Name == "" {
		c.Name = defaultName
	}
	if c.ReadyTimeout == 0 {
		c.ReadyTimeout = defaultReadyTimeout
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	if c.Dir != "" {
		if abs, err := filepath.Abs(c.Dir); err == nil {
			c.Dir = abs
		}
	}
	return c
}

// Validate reports what is missing or wrong in c (after defaults).
func (c Config) Validate() error {
	c = c.withDefaults()
	var problems []string
	if c.Dir == "" {
		problems = append(problems, "no Dir")
	}
	if c.Supervisor == nil {
		problems = append(problems, "no Supervisor")
	}
	if ip := net.ParseIP(c.Host); ip == nil || ip.IsUnspecified() {
		problems = append(problems, fmt.Sprintf("Host %q is not a specific IP address", c.Host))
	}
	for name, p := range map[string]int{"APIServerPort": c.APIServerPort, "EtcdClientPort": c.EtcdClientPort, "EtcdPeerPort": c.EtcdPeerPort} {
		if p < 0 || p > 65535 {
			problems = append(problems, fmt.Sprintf("%s %d is out of range", name, p))
		}
	}
	if c.ReadyTimeout < 0 {
		problems = append(problems, "negative ReadyTimeout")
	}
	if strings.ContainsAny(c.Name, "/\x00") {
		problems = append(problems, fmt.Sprintf("Name %q is not a plain name", c.Name))
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, strings.Join(problems, "; "))
	}
	return nil
}
