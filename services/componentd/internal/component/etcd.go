package component

import (
	"crypto/tls"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/process"
)

const loopback = "127.0.0.1"

func etcd() *Component {
	return &Component{
		Name: api.ComponentEtcd,
		Uses: []string{
			CertFile(api.CertEtcdCA),
			CertFile(api.CertEtcdServer), KeyFile(api.CertEtcdServer),
			CertFile(api.CertEtcdPeer), KeyFile(api.CertEtcdPeer),
		},
		single: 1, ha: 3,
		// etcd fsyncs every commit, so a member that takes longer to stop loses nothing
		// by being killed; its clients' streams can keep a graceful stop waiting.
		StopTimeout: 5 * time.Second,
		args:        etcdArgs,
		probe:       etcdProbe,
	}
}

// etcdMembers returns the infra's etcd members the replicas use, checked.
func etcdMembers(in *Inputs) ([]api.EtcdMember, error) {
	n := etcd().Replicas(in.Policy)
	if len(in.Infra.Etcd) < n {
		return nil, fmt.Errorf("%w: %d etcd members allocated, %d needed", ErrIncompleteInfra, len(in.Infra.Etcd), n)
	}
	members := make([]api.EtcdMember, n)
	for i := range n {
		m := in.Infra.Etcd[i]
		if m.Host == "" {
			m.Host = loopback
		}
		if m.Name == "" {
			m.Name = "etcd-" + strconv.Itoa(i)
		}
		if m.ClientPort <= 0 || m.PeerPort <= 0 {
			return nil, fmt.Errorf("%w: etcd member %d has no client or peer port", ErrIncompleteInfra, i)
		}
		members[i] = m
	}
	return members, nil
}

func etcdClientURL(m api.EtcdMember) string {
	return "https://" + net.JoinHostPort(m.Host, strconv.Itoa(m.ClientPort))
}

func etcdPeerURL(m api.EtcdMember) string {
	return "https://" + net.JoinHostPort(m.Host, strconv.Itoa(m.PeerPort))
}

// EtcdDataDir is replica n's data directory, relative to the cluster's directory.
func EtcdDataDir(n int) string { return "etcd-" + strconv.Itoa(n) }

func etcdArgs(in *Inputs, n int) ([]string, error) {
	members, err := etcdMembers(in)
	if err != nil {
		return nil, err
	}
	me := members[n]
	return []string{
		"--name=" + me.Name,
		"--data-dir=" + filepath.Join(in.Dir, EtcdDataDir(n)),
		"--listen-client-urls=" + etcdClientURL(me),
		"--advertise-client-urls=" + etcdClientURL(me),
		"--listen-peer-urls=" + etcdPeerURL(me),
		"--initial-advertise-peer-urls=" + etcdPeerURL(me),
		"--initial-cluster=" + initialCluster(members),
		// Ignored once the data dir holds a member: a restart rejoins the same cluster.
		"--initial-cluster-state=new",
		"--initial-cluster-token=" + in.Cluster,
		"--cert-file=" + in.path(CertFile(api.CertEtcdServer)),
		"--key-file=" + in.path(KeyFile(api.CertEtcdServer)),
		"--trusted-ca-file=" + in.path(CertFile(api.CertEtcdCA)),
		"--client-cert-auth=true",
		"--peer-cert-file=" + in.path(CertFile(api.CertEtcdPeer)),
		"--peer-key-file=" + in.path(KeyFile(api.CertEtcdPeer)),
		"--peer-trusted-ca-file=" + in.path(CertFile(api.CertEtcdCA)),
		"--peer-client-cert-auth=true",
		// Modest memory: fewer entries kept in memory between snapshots.
		"--snapshot-count=10000",
	}, nil
}

// etcdProbe GETs /health on the member's client URL with kube-apiserver's etcd client
// certificate: it answers 200 only while the member has a leader.
func etcdProbe(in *Inputs, n int) (process.Probe, error) {
	members, err := etcdMembers(in)
	if err != nil {
		return nil, err
	}
	c, err := tlsClient(in.Files[CertFile(api.CertEtcdCA)],
		in.Files[CertFile(api.CertAPIServerEtcdClient)], in.Files[KeyFile(api.CertAPIServerEtcdClient)])
	if err != nil {
		return nil, err
	}
	return process.HTTPProbe(c, etcdClientURL(members[n])+"/health", nil), nil
}

// EtcdMember is one etcd member of a cluster as its replica runs it.
type EtcdMember struct {
	Name      string // --name
	ClientURL string
	PeerURL   string
	DataDir   string // absolute
}

// EtcdMembers returns the cluster's etcd members (as many as its policy runs) and the
// --initial-cluster they form.
func EtcdMembers(in *Inputs) ([]EtcdMember, string, error) {
	members, err := etcdMembers(in)
	if err != nil {
		return nil, "", err
	}
	out := make([]EtcdMember, len(members))
	for i, m := range members {
		out[i] = EtcdMember{Name: m.Name, ClientURL: etcdClientURL(m), PeerURL: etcdPeerURL(m),
			DataDir: filepath.Join(in.Dir, EtcdDataDir(i))}
	}
	return out, initialCluster(members), nil
}

// initialCluster is --initial-cluster: every member's name=peer URL.
func initialCluster(members []api.EtcdMember) string {
	initial := make([]string, len(members))
	for i, m := range members {
		initial[i] = m.Name + "=" + etcdPeerURL(m)
	}
	return strings.Join(initial, ",")
}

// EtcdClientTLS is the TLS configuration of a client of the cluster's etcd: it trusts the
// etcd CA and presents kube-apiserver's etcd client certificate (what the probe uses too).
func EtcdClientTLS(in *Inputs) (*tls.Config, error) {
	return tlsConfig(in.Files[CertFile(api.CertEtcdCA)],
		in.Files[CertFile(api.CertAPIServerEtcdClient)], in.Files[KeyFile(api.CertAPIServerEtcdClient)])
}
