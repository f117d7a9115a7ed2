package daemon_test

import (
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/hostplane/hostplane/pkg/daemon"
)

func TestBase_NATSReplicas_FromEnvOrFlag_OneToFive(t *testing.T) {
	t.Setenv("HOSTPLANE_NATS_REPLICAS", "3")
	fs := flag.NewFlagSet("clusterd", flag.ContinueOnError)
	b := daemon.Flags(fs, "clusterd")
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Validate(); err != nil || b.NATSReplicas != 3 {
		t.Fatalf("env 3: replicas %d, err %v", b.NATSReplicas, err)
	}

	fs = flag.NewFlagSet("clusterd", flag.ContinueOnError)
	fs.SetOutput(&strings.Builder{})
	b = daemon.Flags(fs, "clusterd")
	if err := fs.Parse([]string{"--nats-replicas", "9"}); err == nil || !strings.Contains(err.Error(), "from 1 to 5") {
		t.Fatalf("--nats-replicas 9: %v, want a 1-to-5 error", err)
	}

	t.Setenv("HOSTPLANE_NATS_REPLICAS", "three")
	fs = flag.NewFlagSet("clusterd", flag.ContinueOnError)
	b = daemon.Flags(fs, "clusterd")
	if err := b.Validate(); err == nil || !strings.Contains(err.Error(), "HOSTPLANE_NATS_REPLICAS") {
		t.Fatalf("env three: %v, want an error naming HOSTPLANE_NATS_REPLICAS", err)
	}

	var zero daemon.Base
	if err := zero.Validate(); err != nil || zero.NATSReplicas != 1 {
		t.Fatalf("default: replicas %d, err %v", zero.NATSReplicas, err)
	}
}

func TestBase_NATSTLS_FromEnvOrFlags_CertificateNeedsItsKey(t *testing.T) {
	t.Setenv("HOSTPLANE_NATS_CA_FILE", "/tls/ca.crt")
	t.Setenv("HOSTPLANE_NATS_CERT_FILE", "/tls/pkid.crt")
	t.Setenv("HOSTPLANE_NATS_KEY_FILE", "/tls/pkid.key")
	fs := flag.NewFlagSet("pkid", flag.ContinueOnError)
	b := daemon.Flags(fs, "pkid")
	if err := fs.Parse([]string{"--nats-ca-file", "/other/ca.crt"}); err != nil {
		t.Fatal(err)
	}
	if err := b.Validate(); err != nil {
		t.Fatal(err)
	}
	if b.NATSTLS.CAFile != "/other/ca.crt" || b.NATSTLS.CertFile != "/tls/pkid.crt" || b.NATSTLS.KeyFile != "/tls/pkid.key" {
		t.Fatalf("NATSTLS = %+v", b.NATSTLS)
	}

	t.Setenv("HOSTPLANE_NATS_KEY_FILE", "")
	fs = flag.NewFlagSet("pkid", flag.ContinueOnError)
	b = daemon.Flags(fs, "pkid")
	if err := b.Validate(); err == nil || !strings.Contains(err.Error(), "HOSTPLANE_NATS_KEY_FILE") {
		t.Fatalf("certificate without a key: %v, want an error naming HOSTPLANE_NATS_KEY_FILE", err)
	}
}

func TestBase_LeaderService_NeedsNamespaceNameAndThePodAddress(t *testing.T) {
	t.Setenv("HOSTPLANE_LEADER_SERVICE", "hostplane-system/infrad-endpoints")
	t.Setenv("HOSTPLANE_POD_IP", "10.88.1.7")
	t.Setenv("HOSTPLANE_MANAGEMENT_KUBECONFIG", "/etc/hostplane/management/kubeconfig")
	fs := flag.NewFlagSet("infrad", flag.ContinueOnError)
	b := daemon.Flags(fs, "infrad")
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Validate(); err != nil || b.LeaderService != "hostplane-system/infrad-endpoints" || b.PodIP != "10.88.1.7" {
		t.Fatalf("env: %q %q, err %v", b.LeaderService, b.PodIP, err)
	}
	for name, bad := range map[string]daemon.Base{
		"no pod address": {LeaderService: "hostplane-system/infrad-endpoints"},
		"no service":     {PodIP: "10.88.1.7"},
		"no namespace":   {LeaderService: "infrad-endpoints", PodIP: "10.88.1.7"},
		"two slashes":    {LeaderService: "a/b/c", PodIP: "10.88.1.7"},
		"no kubeconfig":  {LeaderService: "hostplane-system/infrad-endpoints", PodIP: "10.88.1.7"},
	} {
		if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "HOSTPLANE_LEADER_SERVICE") {
			t.Errorf("%s: %v, want an error naming HOSTPLANE_LEADER_SERVICE", name, err)
		}
	}
}

func TestPositiveOr_KeepsAPositiveDuration_ElseTheDefault(t *testing.T) {
	for _, tc := range []struct{ d, want time.Duration }{{0, time.Minute}, {-time.Second, time.Minute}, {time.Second, time.Second}} {
		if got := daemon.PositiveOr(tc.d, time.Minute); got != tc.want {
			t.Errorf("PositiveOr(%v, 1m) = %v, want %v", tc.d, got, tc.want)
		}
	}
}
