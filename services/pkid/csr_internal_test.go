package pkid

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"

	"github.com/hostplane/hostplane/pkg/api"
)

// csrPEM is a certificate request for subject with the given DNS and IP SANs.
func csrPEM(t *testing.T, subject pkix.Name, dns []string, ips []net.IP) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: subject, DNSNames: dns, IPAddresses: ips}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func TestDecide_ApprovesOnlyKubeletClientCSRsOfTheRequestersMachine(t *testing.T) {
	const cluster = "demo"
	node := func(name string) pkix.Name {
		return pkix.Name{CommonName: "system:node:" + name, Organization: []string{"system:nodes"}}
	}
	poolA := []string{"system:bootstrappers", api.BootstrapGroupPrefix + "a", "system:authenticated"}
	machines := map[string]*machineFacts{
		"m-a":             {Labels: map[string]string{LabelClusterName: cluster, api.LabelNodePool: "a"}},
		"m-b":             {Labels: map[string]string{LabelClusterName: cluster, api.LabelNodePool: "b"}},
		"m-other-cluster": {Labels: map[string]string{LabelClusterName: "other", api.LabelNodePool: "a"}},
		"m-deleting":      {Labels: map[string]string{LabelClusterName: cluster, api.LabelNodePool: "a"}, Deleting: true},
		"m-unpooled":      {Labels: map[string]string{LabelClusterName: cluster}},
		"m-claimed":       {Labels: map[string]string{LabelClusterName: cluster, api.LabelNodePool: api.AutoNodePoolName}, Annotations: map[string]string{api.AnnotationNodeClaim: "default-x7k2p"}},
		"m-unclaimed":     {Labels: map[string]string{LabelClusterName: cluster, api.LabelNodePool: api.AutoNodePoolName}},
	}
	autoNode := []string{"system:bootstrappers", api.BootstrapGroupPrefix + api.AutoNodePoolName, "system:authenticated"}
	clientUsages := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}
	tests := []struct {
		name     string
		signer   string
		request  []byte
		usages   []certificatesv1.KeyUsage
		user     string
		groups   []string
		want     string
		wantPool string
	}{
		{name: "bootstrap token of the Machine's pool", request: csrPEM(t, node("m-a"), nil, nil), user: "system:bootstrap:abc123", groups: poolA, want: OutcomeApproved, wantPool: "a"},
		{name: "key encipherment is allowed too", request: csrPEM(t, node("m-a"), nil, nil), usages: append([]certificatesv1.KeyUsage{certificatesv1.UsageKeyEncipherment}, clientUsages...), user: "system:bootstrap:abc123", groups: poolA, want: OutcomeApproved},
		{name: "the node renews its own certificate", request: csrPEM(t, node("m-b"), nil, nil), user: "system:node:m-b", groups: []string{"system:nodes"}, want: OutcomeApproved},
		{name: "renewal of a Machine without a pool label", request: csrPEM(t, node("m-unpooled"), nil, nil), user: "system:node:m-unpooled", want: OutcomeApproved},
		{name: "Machine Karpenter launched for a NodeClaim", request: csrPEM(t, node("m-claimed"), nil, nil), user: "system:bootstrap:abc123", groups: autoNode, want: OutcomeApproved, wantPool: api.AutoNodePoolName},
		{name: "autonode Machine launched for no NodeClaim", request: csrPEM(t, node("m-unclaimed"), nil, nil), user: "system:bootstrap:abc123", groups: autoNode, want: OutcomeUnknownMachine},
		{name: "no such Machine", request: csrPEM(t, node("ghost"), nil, nil), user: "system:bootstrap:abc123", groups: poolA, want: OutcomeUnknownMachine},
		{name: "Machine of another cluster", request: csrPEM(t, node("m-other-cluster"), nil, nil), user: "system:bootstrap:abc123", groups: poolA, want: OutcomeUnknownMachine},
		{name: "Machine being deleted", request: csrPEM(t, node("m-deleting"), nil, nil), user: "system:bootstrap:abc123", groups: poolA, want: OutcomeUnknownMachine},
		{name: "Machine of another pool", request: csrPEM(t, node("m-b"), nil, nil), user: "system:bootstrap:abc123", groups: poolA, want: OutcomeWrongNodePool},
		{name: "Machine without a pool label from a bootstrap token", request: csrPEM(t, node("m-unpooled"), nil, nil), user: "system:bootstrap:abc123", groups: poolA, want: OutcomeWrongNodePool},
		{name: "kubelet serving signer", signer: certificatesv1.KubeletServingSignerName, request: csrPEM(t, node("m-a"), nil, nil), user: "system:node:m-a", want: OutcomeWrongSigner},
		{name: "generic client signer", signer: certificatesv1.KubeAPIServerClientSignerName, request: csrPEM(t, node("m-a"), nil, nil), user: "system:bootstrap:abc123", groups: poolA, want: OutcomeWrongSigner},
		{name: "not PEM", request: []byte("garbage"), user: "system:bootstrap:abc123", groups: poolA, want: OutcomeBadRequest},
		{name: "common name without system:node:", request: csrPEM(t, pkix.Name{CommonName: "m-a", Organization: []string{"system:nodes"}}, nil, nil), user: "system:bootstrap:abc123", groups: poolA, want: OutcomeBadRequest},
		{name: "node name that is no object name", request: csrPEM(t, node("M_A"), nil, nil), user: "system:bootstrap:abc123", groups: poolA, want: OutcomeBadRequest},
		{name: "extra organization", request: csrPEM(t, pkix.Name{CommonName: "system:node:m-a", Organization: []string{"system:nodes", "system:masters"}}, nil, nil), user: "system:bootstrap:abc123", groups: poolA, want: OutcomeBadRequest},
		{name: "no organization", request: csrPEM(t, pkix.Name{CommonName: "system:node:m-a"}, nil, nil), user: "system:bootstrap:abc123", groups: poolA, want: OutcomeBadRequest},
		{name: "DNS SAN", request: csrPEM(t, node("m-a"), []string{"m-a"}, nil), user: "system:bootstrap:abc123", groups: poolA, want: OutcomeBadRequest},
		{name: "IP SAN", request: csrPEM(t, node("m-a"), nil, []net.IP{net.ParseIP("10.0.0.1")}), user: "system:bootstrap:abc123", groups: poolA, want: OutcomeBadRequest},
		{name: "server auth usage", request: csrPEM(t, node("m-a"), nil, nil), usages: append([]certificatesv1.KeyUsage{certificatesv1.UsageServerAuth}, clientUsages...), user: "system:bootstrap:abc123", groups: poolA, want: OutcomeBadRequest},
		{name: "no client auth usage", request: csrPEM(t, node("m-a"), nil, nil), usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature}, user: "system:bootstrap:abc123", groups: poolA, want: OutcomeBadRequest},
		{name: "another node asks for it", request: csrPEM(t, node("m-a"), nil, nil), user: "system:node:m-b", want: OutcomeUnknownRequester},
		{name: "an admin asks for it", request: csrPEM(t, node("m-a"), nil, nil), user: "kubernetes-admin", groups: []string{"system:masters"}, want: OutcomeUnknownRequester},
		{name: "bootstrap token of no pool", request: csrPEM(t, node("m-a"), nil, nil), user: "system:bootstrap:abc123", groups: []string{"system:bootstrappers"}, want: OutcomeUnknownRequester},
		{name: "bootstrap token of two pools", request: csrPEM(t, node("m-a"), nil, nil), user: "system:bootstrap:abc123", groups: append(poolA, api.BootstrapGroupPrefix+"b"), want: OutcomeUnknownRequester},
		{name: "malformed bootstrap user", request: csrPEM(t, node("m-a"), nil, nil), user: "system:bootstrap:ABC", groups: poolA, want: OutcomeUnknownRequester},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			csr := &certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{
				SignerName: tt.signer, Request: tt.request, Usages: tt.usages, Username: tt.user, Groups: tt.groups,
			}}
			if csr.Spec.SignerName == "" {
				csr.Spec.SignerName = certificatesv1.KubeAPIServerClientKubeletSignerName
			}
			if csr.Spec.Usages == nil {
				csr.Spec.Usages = clientUsages
			}
			var d decision
			c, early := inspect(csr)
			if early != nil {
				d = *early
			} else {
				d = judge(cluster, c, machines[c.node])
			}
			if d.Outcome != tt.want {
				t.Fatalf("outcome %s (%s), want %s", d.Outcome, d.Reason, tt.want)
			}
			if d.Reason == "" {
				t.Fatal("no reason")
			}
			if tt.wantPool != "" && d.NodePool != tt.wantPool {
				t.Fatalf("node pool %q, want %q", d.NodePool, tt.wantPool)
			}
			if d.approved() && !strings.Contains(d.Reason, "Machine hostplane-demo/") {
				t.Fatalf("approval message %q does not name the Machine", d.Reason)
			}
		})
	}
}

func TestJudgeUnmanaged_ApprovesOnlyNodesOfPlatformNonePools(t *testing.T) {
	pool := func(platform string, deleting bool) *api.NodePool {
		p := &api.NodePool{Spec: api.NodePoolSpec{Platform: api.NodePoolPlatform{Type: platform}}}
		p.Name = "metal"
		if deleting {
			p.DeletionTimestamp = &time.Time{}
		}
		return p
	}
	for _, tt := range []struct {
		name string
		c    claim
		pool *api.NodePool
		want string
	}{
		{"a none pool's bootstrap token", claim{node: "n1", nodePool: "metal"}, pool(api.PlatformNone, false), OutcomeApproved},
		{"a none pool's node renewing", claim{node: "n1"}, pool(api.PlatformNone, false), OutcomeApproved},
		{"a local pool: its machines are Cluster API's", claim{node: "n1", nodePool: "metal"}, pool(api.PlatformLocal, false), OutcomeUnknownMachine},
		{"a none pool being deleted", claim{node: "n1", nodePool: "metal"}, pool(api.PlatformNone, true), OutcomeUnknownMachine},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := judgeUnmanaged(tt.c, tt.pool)
			if d.Outcome != tt.want || d.Reason == "" {
				t.Fatalf("outcome %s (%q), want %s", d.Outcome, d.Reason, tt.want)
			}
			if d.approved() && d.NodePool != "metal" {
				t.Fatalf("node pool %q", d.NodePool)
			}
		})
	}
}
