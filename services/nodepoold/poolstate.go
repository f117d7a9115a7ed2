package nodepoold

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/hostplane/hostplane/apis/infrastructure/v1alpha1"
	"github.com/hostplane/hostplane/pkg/api"
)

// guestTimeout bounds each call to a guest cluster, so an unreachable control plane cannot
// hold a reconcile.
const guestTimeout = 10 * time.Second

// poolState is what the management and guest clusters hold of one pool.
type poolState struct {
	md *clusterv1.MachineDeployment // Replace pools
	ms *clusterv1.MachineSet        // InPlace pools
	// machines are the pool's Machines (those being deleted included), by name.
	machines []clusterv1.Machine
	// infra holds the LocalMachines' Ready condition messages, by LocalMachine name.
	infra map[string]infraReport
	// nodes are the guest cluster's Nodes by name; nil when the guest cluster could not be
	// read (guestErr says why).
	nodes    map[string]*corev1.Node
	guestErr error
}

// infraReport is what infrad's LocalMachine says about a machine.
type infraReport struct {
	ready   bool
	reason  string
	message string
}

// observe reads the pool's Cluster API objects and infrad's LocalMachines (cached) and the
// guest cluster's Nodes. c is the pool's cluster (nil when its record is gone).
func (d *Daemon) observe(ctx context.Context, np *api.NodePool, c *api.Cluster) (*poolState, error) {
	mc := d.mgmt.client()
	ns := api.ControlPlaneNamespace(np.Cluster)
	st := &poolState{infra: map[string]infraReport{}}
	key := client.ObjectKey{Namespace: ns, Name: np.Name}
	if np.Spec.Management.UpgradeType == api.UpgradeTypeInPlace {
		ms := &clusterv1.MachineSet{}
		if err := mc.Get(ctx, key, ms); err == nil {
			st.ms = ms
		} else if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("get MachineSet %s: %w", key, err)
		}
	} else {
		md := &clusterv1.MachineDeployment{}
		if err := mc.Get(ctx, key, md); err == nil {
			st.md = md
		} else if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("get MachineDeployment %s: %w", key, err)
		}
	}
	machines, err := listMachines(ctx, mc, np.Cluster, np.Name)
	if err != nil {
		return nil, err
	}
	st.machines = machines
	if err := st.readInfra(ctx, mc, np); err != nil {
		return nil, err
	}
	st.nodes, st.guestErr = d.guestNodes(ctx, np.Cluster, watchable(c))
	return st, nil
}

// listMachines lists the Machines of a pool (the template labels mark them).
func listMachines(ctx context.Context, c client.Reader, cluster, pool string) ([]clusterv1.Machine, error) {
	var list clusterv1.MachineList
	if err := c.List(ctx, &list, client.InNamespace(api.ControlPlaneNamespace(cluster)),
		client.MatchingLabels{api.LabelCluster: cluster, api.LabelNodePool: pool}); err != nil {
		return nil, fmt.Errorf("list Machines: %w", err)
	}
	return list.Items, nil
}

// readInfra reads the LocalMachines' Ready conditions; without infrad's CRDs there are none.
func (st *poolState) readInfra(ctx context.Context, r client.Reader, np *api.NodePool) error {
	var list infrav1.LocalMachineList
	err := r.List(ctx, &list, client.InNamespace(api.ControlPlaneNamespace(np.Cluster)),
		client.MatchingLabels{api.LabelNodePool: np.Name})
	if isNoKind(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list LocalMachines: %w", err)
	}
	for _, lm := range list.Items {
		if c := meta.FindStatusCondition(lm.Status.Conditions, infrav1.ConditionReady); c != nil {
			st.infra[lm.Name] = infraReport{ready: c.Status == metav1.ConditionTrue, reason: c.Reason, message: c.Message}
		}
	}
	return nil
}

// watchable reports whether the guest cluster of c is one to watch the Nodes of: it exists,
// is not being deleted and does not hibernate (nothing would answer the watch).
func watchable(c *api.Cluster) bool {
	return c != nil && c.DeletionTimestamp == nil && !c.Spec.Hibernating()
}

// guestNodes returns the guest cluster's Nodes: from its Node informer when watch says to
// run one and it follows the guest, else listed there and then (the informer is stopped when
// watch is false).
func (d *Daemon) guestNodes(ctx context.Context, cluster string, watch bool) (map[string]*corev1.Node, error) {
	gc, err := d.guestClients()
	if err != nil {
		return nil, err
	}
	g, err := gc.For(ctx, cluster)
	if err != nil {
		return nil, err
	}
	if d.nodeWatches != nil {
		if !watch {
			d.nodeWatches.stop(cluster, "the cluster hibernates or is being deleted")
		} else if nodes, ok := d.nodeWatches.nodes(cluster, g); ok {
			return nodes, nil
		}
	}
	ctx, cancel := context.WithTimeout(ctx, guestTimeout)
	defer cancel()
	// From the guest apiserver's watch cache (resourceVersion 0): a quorum read would decode
	// every Node from etcd on every reconcile of every pool.
	list, err := g.Clientset.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return nil, fmt.Errorf("list the guest cluster's nodes: %w", err)
	}
	out := make(map[string]*corev1.Node, len(list.Items))
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out, nil
}

// isNoKind reports an error of a kind the apiserver does not serve (a CRD not installed).
func isNoKind(err error) bool {
	if err == nil {
		return false
	}
	var nm *meta.NoKindMatchError
	return errors.As(err, &nm) || meta.IsNoMatchError(err) ||
		(apierrors.IsNotFound(err) && strings.Contains(err.Error(), "the server could not find the requested resource"))
}

// appliedTemplate is the machine template the MachineDeployment or MachineSet points at now.
func (st *poolState) appliedTemplate() *machineTemplate {
	var spec *clusterv1.MachineSpec
	var labels map[string]string
	switch {
	case st.md != nil:
		spec, labels = &st.md.Spec.Template.Spec, st.md.Spec.Template.Labels
	case st.ms != nil:
		spec, labels = &st.ms.Spec.Template.Spec, st.ms.Spec.Template.Labels
	default:
		return nil
	}
	if spec.Bootstrap.DataSecretName == nil || *spec.Bootstrap.DataSecretName == "" {
		return nil
	}
	return &machineTemplate{Version: spec.Version, DataSecret: *spec.Bootstrap.DataSecretName, InstanceType: labels[api.LabelMachineInstanceType]}
}

// replicasToApply is the size to write: the pool's fixed size, or for an autoscaled pool
// the current size clamped into its bounds (the autoscaler owns it within them; a new pool
// starts at min).
func (st *poolState) replicasToApply(np *api.NodePool) int32 {
	a := np.Spec.AutoScaling
	if a == nil {
		return np.Spec.DesiredReplicas()
	}
	cur := a.Min
	switch {
	case st.md != nil && st.md.Spec.Replicas != nil:
		cur = *st.md.Spec.Replicas
	case st.ms != nil && st.ms.Spec.Replicas != nil:
		cur = *st.ms.Spec.Replicas
	}
	return max(a.Min, min(cur, a.Max))
}

// liveMachines are the Machines not being deleted.
func (st *poolState) liveMachines() []clusterv1.Machine {
	var out []clusterv1.Machine
	for _, m := range st.machines {
		if m.DeletionTimestamp.IsZero() {
			out = append(out, m)
		}
	}
	return out
}

// node is the guest Node of a Machine (nil: none yet, or the guest cluster is unreadable).
func (st *poolState) node(m *clusterv1.Machine) *corev1.Node {
	if st.nodes == nil || m.Status.NodeRef.Name == "" {
		return nil
	}
	return st.nodes[m.Status.NodeRef.Name]
}

// nodeReady reports whether the Machine's Node is Ready: from the guest cluster, or, when it
// cannot be read, from Cluster API's NodeReady condition.
func (st *poolState) nodeReady(m *clusterv1.Machine) bool {
	if st.nodes == nil {
		return m.Status.NodeRef.Name != "" && meta.IsStatusConditionTrue(m.Status.Conditions, clusterv1.MachineNodeReadyCondition)
	}
	n := st.node(m)
	return n != nil && nodeConditionStatus(n, corev1.NodeReady) == corev1.ConditionTrue
}

// machineHash is the config hash a Machine's Node reports it runs ("" before it reports one);
// a real node's label (api.LabelCurrentConfig) names current when it matches it.
func (st *poolState) machineHash(m *clusterv1.Machine, current string) string {
	if n := st.node(m); n != nil {
		if h := n.Annotations[api.AnnotationCurrentConfig]; h != "" {
			return h
		}
		if v := n.Labels[api.LabelCurrentConfig]; v != "" {
			if api.RunsConfig(n.Labels, nil, current) {
				return current
			}
			return v // another config's label: not the current hash, whatever it is
		}
	}
	return ""
}

// updated reports whether a Machine runs the pool's current config: its Node says so, or
// (no Node report yet) it boots the current userdata Secret and, InPlace, was not asked for
// another config.
func (st *poolState) updated(m *clusterv1.Machine, s *scope) bool {
	if h := st.machineHash(m, s.hash); h != "" {
		return h == s.hash
	}
	current := api.UserDataSecretName(s.np.Name, s.hash)
	if d := m.Annotations[api.AnnotationDesiredConfig]; d != "" {
		return d == s.hash && m.Annotations[api.AnnotationDesiredUserData] == current
	}
	return m.Spec.Bootstrap.DataSecretName != nil && *m.Spec.Bootstrap.DataSecretName == current
}

// nodeConditionStatus is the status of a Node condition ("" when absent).
func nodeConditionStatus(n *corev1.Node, t corev1.NodeConditionType) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}
