package mtls

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/hostplane/hostplane/pkg/certs"
)

// ClientName is the common name of the gateway's client certificate, the one identity a
// daemon with a client CA answers API calls from (by default).
const ClientName = "hostplane-gateway"

// DaemonPlaceholder in a host given to Generate stands for each daemon's name.
const DaemonPlaceholder = "{daemon}"

// The files of a management TLS directory besides the CA's (certs.CACertFile, CAKeyFile):
// <daemon>.crt and <daemon>.key per daemon, and the gateway's client certificate.
const (
	GatewayCertFile = "gateway.crt"
	GatewayKeyFile  = "gateway.key"
)

// Lifetimes, as the NATS CA's: a 10-year CA, 1-year leaves issued again 30 days before they
// expire.
const (
	caLifetime   = 10 * 365 * 24 * time.Hour
	leafLifetime = 365 * 24 * time.Hour
	renewBefore  = 30 * 24 * time.Hour
)

// Files is a management TLS directory.
type Files struct{ Dir string }

// CAFile is the management CA's certificate.
func (f Files) CAFile() string { return filepath.Join(f.Dir, certs.CACertFile) }

// Server is the admin-port TLS of daemon: its certificate, and the management CA as client
// CA.
func (f Files) Server(daemon string) ServerConfig {
	return ServerConfig{
		CertFile: filepath.Join(f.Dir, daemon+".crt"), KeyFile: filepath.Join(f.Dir, daemon+".key"),
		ClientCAFile: f.CAFile(),
	}
}

// Gateway is the gateway's side: the CA and its client certificate.
func (f Files) Gateway() ClientConfig {
	return ClientConfig{CAFile: f.CAFile(), CertFile: filepath.Join(f.Dir, GatewayCertFile), KeyFile: filepath.Join(f.Dir, GatewayKeyFile)}
}

// Generate makes dir hold the management CA, a server certificate for each daemon (for its
// name and hosts, where DaemonPlaceholder stands for the daemon's name: "{daemon}.hostplane-system.svc",
// "127.0.0.1") and the gateway's client certificate. Like the NATS TLS files, each is made
// once and kept, and issued again when missing, not signed by the CA, not naming every host
// or expiring within 30 days; to rotate one, delete its .crt and run Generate again.
func Generate(dir string, daemons, hosts []string) (Files, error) {
	d := certs.Dir{Path: dir, CAName: "hostplane management CA", CALifetime: caLifetime, LeafLifetime: leafLifetime, RenewBefore: renewBefore}
	for _, name := range daemons {
		h := []string{name}
		for _, host := range hosts {
			if host = strings.ReplaceAll(host, DaemonPlaceholder, name); host != name {
				h = append(h, host)
			}
		}
		if _, err := d.Leaf(name+".crt", name+".key", "hostplane "+name, certs.UsageServer, h); err != nil {
			return Files{}, fmt.Errorf("management TLS: %w", err)
		}
	}
	if _, err := d.Leaf(GatewayCertFile, GatewayKeyFile, ClientName, certs.UsageClient, nil); err != nil {
		return Files{}, fmt.Errorf("management TLS: %w", err)
	}
	return Files{Dir: dir}, nil
}
