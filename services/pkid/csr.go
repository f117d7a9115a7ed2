package pkid

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"regexp"
	"slices"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/hostplane/hostplane/pkg/api"
)

// Outcomes of a kubelet CSR decision: the "outcome" label of
// hostplane_pkid_csr_decisions_total. Every outcome but OutcomeApproved leaves the CSR
// pending; pkid never denies.
const (
	OutcomeApproved         = "approved"
	OutcomeUnknownMachine   = "unknown_machine"
	OutcomeWrongNodePool    = "wrong_nodepool"
	OutcomeWrongSigner      = "wrong_signer"
	OutcomeBadRequest       = "bad_request"
	OutcomeUnknownRequester = "unknown_requester"
	// OutcomeNodeExists: a bootstrap token asked for the certificate of a node that is
	// registered already, whose kubelet holds one (and renews it itself).
	OutcomeNodeExists = "node_exists"
)

var outcomes = []string{OutcomeApproved, OutcomeUnknownMachine, OutcomeWrongNodePool, OutcomeWrongSigner,
	OutcomeBadRequest, OutcomeUnknownRequester, OutcomeNodeExists}

// ApprovalReason is the reason of the Approved condition pkid adds to a kubelet CSR.
const ApprovalReason = "HostplaneMachineMatched"

// Names a kubelet client CSR is judged by.
const (
	// LabelClusterName is Cluster API's cluster label, which every Machine carries.
	LabelClusterName = clusterv1.ClusterNameLabel
	nodeUserPrefix   = "system:node:"
	nodesGroup       = "system:nodes"
	bootstrapPrefix  = "system:bootstrap:"
)

// bootstrapUser is the user name of a bootstrap token: "system:bootstrap:<token id>".
var bootstrapUser = regexp.MustCompile(`^system:bootstrap:[a-z0-9]{6}$`)

// allowedUsages are the key usages a kubelet client certificate may ask for.
var allowedUsages = []certificatesv1.KeyUsage{
	certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageClientAuth,
}

// decision is pkid's verdict on one CSR.
type decision struct {
	Outcome string
	// Reason says why, for the log (and, approved, the condition's message).
	Reason string
	// Node is the Machine the CSR names ("" before the request parsed); NodePool the pool of
	// the bootstrap group ("" for a renewal by the node itself).
	Node, NodePool string
}

func (d decision) approved() bool { return d.Outcome == OutcomeApproved }

// retriable reports whether a later look may decide otherwise: the Machine may not be
// visible yet, or may get its labels later.
func (d decision) retriable() bool {
	return d.Outcome == OutcomeUnknownMachine || d.Outcome == OutcomeWrongNodePool
}

// claim is what a well-formed kubelet client CSR asks for.
type claim struct {
	node     string // the Machine (and Node) name of CN system:node:<node>
	nodePool string // "" when the node renews its own certificate
}

// machineFacts is what pkid reads of the Cluster API Machine a CSR names; nil when there is none.
type machineFacts struct {
	Namespace, Name string
	Labels          map[string]string
	Annotations     map[string]string
	Deleting        bool
}

// inspect checks everything about csr that needs no lookup: the signer, the x509 request and
// the requester. It returns the claim, or the decision that leaves the CSR pending.
func inspect(csr *certificatesv1.CertificateSigningRequest) (claim, *decision) {
	if csr.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName {
		return claim{}, &decision{Outcome: OutcomeWrongSigner,
			Reason: fmt.Sprintf("signer %q is not %s", csr.Spec.SignerName, certificatesv1.KubeAPIServerClientKubeletSignerName)}
	}
	node, err := parseKubeletRequest(csr.Spec.Request, csr.Spec.Usages)
	if err != nil {
		return claim{}, &decision{Outcome: OutcomeBadRequest, Reason: err.Error()}
	}
	user := csr.Spec.Username
	switch {
	case user == nodeUserPrefix+node:
		return claim{node: node}, nil
	case bootstrapUser.MatchString(user):
		var pools []string
		for _, g := range csr.Spec.Groups {
			if p, ok := strings.CutPrefix(g, api.BootstrapGroupPrefix); ok && p != "" {
				pools = append(pools, p)
			}
		}
		if len(pools) != 1 {
			return claim{node: node}, &decision{Outcome: OutcomeUnknownRequester, Node: node,
				Reason: fmt.Sprintf("bootstrap identity %s belongs to %d node pool groups (%s*), not one", user, len(pools), api.BootstrapGroupPrefix)}
		}
		return claim{node: node, nodePool: pools[0]}, nil
	default:
		return claim{node: node}, &decision{Outcome: OutcomeUnknownRequester, Node: node,
			Reason: fmt.Sprintf("requester %q is neither a bootstrap token (%s<id>) nor %s%s", user, bootstrapPrefix, nodeUserPrefix, node)}
	}
}

// parseKubeletRequest checks a kubelet client certificate request (CN system:node:<name>, O
// exactly system:nodes, no SANs, usages among digital signature, key encipherment and
// client auth, client auth included) and returns the node name.
func parseKubeletRequest(request []byte, usages []certificatesv1.KeyUsage) (string, error) {
	block, _ := pem.Decode(request)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return "", fmt.Errorf("the request is not a PEM CERTIFICATE REQUEST")
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return "", fmt.Errorf("parse the request: %w", err)
	}
	if err := req.CheckSignature(); err != nil {
		return "", fmt.Errorf("the request's signature: %w", err)
	}
	node, ok := strings.CutPrefix(req.Subject.CommonName, nodeUserPrefix)
	if !ok {
		return "", fmt.Errorf("common name %q does not start with %s", req.Subject.CommonName, nodeUserPrefix)
	}
	if errs := validation.IsDNS1123Subdomain(node); len(errs) > 0 {
		return "", fmt.Errorf("node name %q is not a valid Machine name: %s", node, strings.Join(errs, "; "))
	}
	if !slices.Equal(req.Subject.Organization, []string{nodesGroup}) {
		return "", fmt.Errorf("organization %v is not exactly [%s]", req.Subject.Organization, nodesGroup)
	}
	if n := len(req.DNSNames) + len(req.IPAddresses) + len(req.EmailAddresses) + len(req.URIs); n > 0 {
		return "", fmt.Errorf("a kubelet client certificate names no hosts, but the request has %d subject alternative names", n)
	}
	for _, u := range usages {
		if !slices.Contains(allowedUsages, u) {
			return "", fmt.Errorf("usage %q is not one of %v", u, allowedUsages)
		}
	}
	if !slices.Contains(usages, certificatesv1.UsageClientAuth) {
		return "", fmt.Errorf("usages %v lack %q", usages, certificatesv1.UsageClientAuth)
	}
	return node, nil
}

// nodeExists is the decision on a bootstrap claim for a node the guest has a Node of: its
// kubelet joined already, so a second certificate for the name would let whoever holds the
// pool's bootstrap token (every machine of the pool, anyone who read its userdata) act as
// that node.
func nodeExists(c claim) decision {
	return decision{Outcome: OutcomeNodeExists, Node: c.node, NodePool: c.nodePool,
		Reason: fmt.Sprintf("node %s is registered already: its kubelet holds a client certificate and renews it as %s%s; "+
			"a bootstrap token gets no second one (delete the Node for the machine to join again)", c.node, nodeUserPrefix, c.node)}
}

// judgeUnmanaged decides a well-formed claim with no Machine behind it, of pool: approved when
// the pool is on platform none (its machines are the user's, and its bootstrap token, which
// only its userdata carries, is their credential) and not being deleted.
func judgeUnmanaged(c claim, pool *api.NodePool) decision {
	d := decision{Node: c.node, NodePool: c.nodePool}
	switch {
	case pool.Spec.Platform.Type != api.PlatformNone:
		d.Outcome, d.Reason = OutcomeUnknownMachine,
			fmt.Sprintf("no Cluster API Machine %s, and node pool %s is on platform %q, whose machines Cluster API creates", c.node, pool.Name, pool.Spec.Platform.Type)
	case pool.DeletionTimestamp != nil:
		d.Outcome, d.Reason = OutcomeUnknownMachine, fmt.Sprintf("node pool %s of node %s is being deleted", pool.Name, c.node)
	case c.nodePool != "":
		d.Outcome, d.Reason = OutcomeApproved, fmt.Sprintf("node %s joins platform-none node pool %s with its pool's bootstrap token", c.node, c.nodePool)
	default:
		d.NodePool = pool.Name
		d.Outcome, d.Reason = OutcomeApproved, fmt.Sprintf("node %s of platform-none node pool %s renews its client certificate", c.node, pool.Name)
	}
	return d
}

// judge decides a well-formed claim of cluster's guest against the Machine it names (m nil:
// no such Machine in api.ControlPlaneNamespace(cluster)).
func judge(cluster string, c claim, m *machineFacts) decision {
	d := decision{Node: c.node, NodePool: c.nodePool}
	ref := api.ControlPlaneNamespace(cluster) + "/" + c.node
	switch {
	case m == nil:
		d.Outcome, d.Reason = OutcomeUnknownMachine, "no Cluster API Machine "+ref
	case m.Labels[LabelClusterName] != cluster:
		d.Outcome, d.Reason = OutcomeUnknownMachine,
			fmt.Sprintf("Machine %s is labelled %s=%q, not %q", ref, LabelClusterName, m.Labels[LabelClusterName], cluster)
	case m.Deleting:
		d.Outcome, d.Reason = OutcomeUnknownMachine, "Machine "+ref+" is being deleted"
	case c.nodePool != "" && m.Labels[api.LabelNodePool] != c.nodePool:
		d.Outcome, d.Reason = OutcomeWrongNodePool,
			fmt.Sprintf("Machine %s belongs to node pool %q, the bootstrap token to %q", ref, m.Labels[api.LabelNodePool], c.nodePool)
	case c.nodePool == api.AutoNodePoolName && m.Annotations[api.AnnotationNodeClaim] == "":
		d.Outcome, d.Reason = OutcomeUnknownMachine,
			fmt.Sprintf("Machine %s of node pool %s was not launched for a Karpenter NodeClaim (no %s annotation)", ref, c.nodePool, api.AnnotationNodeClaim)
	case c.nodePool != "":
		d.Outcome, d.Reason = OutcomeApproved, fmt.Sprintf("Machine %s of node pool %s joins with its pool's bootstrap token", ref, c.nodePool)
	default:
		d.Outcome, d.Reason = OutcomeApproved, fmt.Sprintf("Machine %s renews its node's client certificate", ref)
	}
	return d
}
