// Package provider is Hostplane's cloud provider for Karpenter's core: the NodeClaims of the
// karpenter.sh NodePool that stands for an autoscaled Hostplane NodePool become Machines of
// that pool's Cluster API MachineDeployment.
//
// The pool's size is min plus the NodeClaims made for it: a NodeClaim raises the
// MachineDeployment's replicas and claims the new Machine (annotation hostplane.dev/nodeclaim);
// deleting a NodeClaim marks its Machine for deletion (Cluster API's delete-machine annotation)
// and lowers the replicas. The machines themselves are infrad's: they boot from ignitiond and
// join through pkid's CSR check like every other machine of the pool, and rollouts, autorepair
// and drain stay Cluster API's. Nodes up to min have no NodeClaim, so Karpenter never removes
// them.
package provider

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/awslabs/operatorpkg/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"

	"github.com/hostplane/hostplane/cmd/hostplane-karpenter/internal/nodeclass"
	"github.com/hostplane/hostplane/pkg/api"
)

// AnnotationNodeClaim on a Machine names the NodeClaim the Machine was launched for.
const AnnotationNodeClaim = api.AnnotationNodeClaim

// claimGrace is how old an unclaimed Machine of an autoscaled pool must be before the repair
// takes it away: a Create claims the Machine its scale-up made within seconds.
const claimGrace = 2 * time.Minute

// Name is the provider's name in Karpenter's metrics and logs.
const Name = "hostplane"

// Config says where the cluster's Machines are.
type Config struct {
	// Management reads and writes Cluster API objects in Namespace, the cluster's
	// control-plane namespace of the management cluster.
	Management client.Client
	Namespace  string
	Cluster    string
	// Guest is Karpenter's client of the guest cluster (NodeClaims).
	Guest client.Client
	// LaunchTimeout bounds how long Create waits for the pool's new Machine to get a
	// provider ID (default 2m; spec.autoscaling.maxNodeProvisionTime).
	LaunchTimeout time.Duration
	// MaxNodesTotal, when above 0, bounds the cluster's Machines: Create launches none beyond
	// it (spec.autoscaling.maxNodesTotal).
	MaxNodesTotal int32
	// Poll is how often Create looks (default 250ms).
	Poll time.Duration
}

// Provider implements cloudprovider.CloudProvider.
type Provider struct {
	cfg Config
	// admitting serialises the launches while MaxNodesTotal bounds them, so that two
	// NodeClaims never both take the last place.
	admitting sync.Mutex
}

// New returns the provider.
func New(cfg Config) *Provider {
	if cfg.LaunchTimeout <= 0 {
		cfg.LaunchTimeout = 2 * time.Minute
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 250 * time.Millisecond
	}
	return &Provider{cfg: cfg}
}

// admit makes room for one more machine under MaxNodesTotal: it returns what to call once
// the launch made its Machine (or failed; calling it again does nothing), or an insufficient-capacity error when the cluster
// is at the bound.
func (p *Provider) admit(ctx context.Context) (func(), error) {
	if p.cfg.MaxNodesTotal <= 0 {
		return func() {}, nil
	}
	p.admitting.Lock()
	var list clusterv1.MachineList
	if err := p.cfg.Management.List(ctx, &list, client.InNamespace(p.cfg.Namespace),
		client.MatchingLabels{clusterv1.ClusterNameLabel: p.cfg.Cluster}); err != nil {
		p.admitting.Unlock()
		return nil, fmt.Errorf("list Machines: %w", err)
	}
	live := 0
	for _, m := range list.Items {
		if m.DeletionTimestamp.IsZero() {
			live++
		}
	}
	if live >= int(p.cfg.MaxNodesTotal) {
		p.admitting.Unlock()
		return nil, cloudprovider.NewInsufficientCapacityError(fmt.Errorf("cluster %s has %d machines, its spec.autoscaling.maxNodesTotal", p.cfg.Cluster, live))
	}
	return sync.OnceFunc(p.admitting.Unlock), nil
}

var _ cloudprovider.CloudProvider = (*Provider)(nil)

// Name implements cloudprovider.CloudProvider.
func (p *Provider) Name() string { return Name }

// GetSupportedNodeClasses implements cloudprovider.CloudProvider.
func (p *Provider) GetSupportedNodeClasses() []status.Object {
	return []status.Object{&nodeclass.HostplaneNodeClass{}}
}

// RepairPolicies implements cloudprovider.CloudProvider: none, a pool's MachineHealthCheck
// repairs its machines.
func (p *Provider) RepairPolicies() []cloudprovider.RepairPolicy { return nil }

// IsDrifted implements cloudprovider.CloudProvider: a pool's machines follow its
// MachineDeployment's rollouts, never Karpenter's drift; an autoprovisioned machine drifts
// when the autonode pool's release or userdata moved on (a control-plane upgrade).
func (p *Provider) IsDrifted(ctx context.Context, nc *karpv1.NodeClaim) (cloudprovider.DriftReason, error) {
	// An autoprovisioned Machine is named after its NodeClaim: one read, not a list of every
	// Machine for each NodeClaim Karpenter checks.
	var m clusterv1.Machine
	err := p.cfg.Management.Get(ctx, types.NamespacedName{Namespace: p.cfg.Namespace, Name: nc.Name}, &m)
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("get Machine %s: %w", nc.Name, err)
	}
	if !isAutoNode(&m) || m.Annotations[AnnotationNodeClaim] != nc.Name {
		return "", nil
	}
	return p.autoNodeDrift(ctx, &m)
}

// GetInstanceTypes implements cloudprovider.CloudProvider: the one instance type of the pool
// the karpenter.sh NodePool stands for; for any other NodePool, the whole local catalogue
// while autoprovisioning is on.
func (p *Provider) GetInstanceTypes(ctx context.Context, np *karpv1.NodePool) ([]*cloudprovider.InstanceType, error) {
	name, ok := strings.CutPrefix(np.Name, KarpenterPoolPrefix)
	if !ok {
		tmpl, err := p.autoNode(ctx)
		if err != nil || tmpl == nil {
			return nil, err
		}
		return catalogue(), nil
	}
	pl, err := p.pool(ctx, name)
	if err != nil || pl == nil {
		return nil, err
	}
	return []*cloudprovider.InstanceType{pl.it}, nil
}

// pools lists the cluster's autoscaled pools.
func (p *Provider) pools(ctx context.Context) ([]*pool, error) {
	var list clusterv1.MachineDeploymentList
	if err := p.cfg.Management.List(ctx, &list, client.InNamespace(p.cfg.Namespace),
		client.MatchingLabels{clusterv1.ClusterNameLabel: p.cfg.Cluster}); err != nil {
		return nil, fmt.Errorf("list MachineDeployments: %w", err)
	}
	var out []*pool
	for i := range list.Items {
		pl, ok, err := poolOf(&list.Items[i])
		if err != nil {
			log.FromContext(ctx).Error(err, "skipping a pool")
			continue
		}
		if ok && list.Items[i].DeletionTimestamp.IsZero() {
			out = append(out, pl)
		}
	}
	return out, nil
}

// pool is the autoscaled pool called name; nil if there is none (any more).
func (p *Provider) pool(ctx context.Context, name string) (*pool, error) {
	var md clusterv1.MachineDeployment
	err := p.cfg.Management.Get(ctx, types.NamespacedName{Namespace: p.cfg.Namespace, Name: name}, &md)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get MachineDeployment %s: %w", name, err)
	}
	pl, ok, err := poolOf(&md)
	if err != nil || !ok || !md.DeletionTimestamp.IsZero() {
		return nil, err
	}
	return pl, nil
}

// machines lists the Machines of a pool's MachineDeployment.
func (p *Provider) machines(ctx context.Context, poolName string) ([]clusterv1.Machine, error) {
	var list clusterv1.MachineList
	if err := p.cfg.Management.List(ctx, &list, client.InNamespace(p.cfg.Namespace),
		client.MatchingLabels{clusterv1.ClusterNameLabel: p.cfg.Cluster, clusterv1.MachineDeploymentNameLabel: poolName}); err != nil {
		return nil, fmt.Errorf("list Machines: %w", err)
	}
	return list.Items, nil
}

// claimedMachines lists every Machine of the cluster launched for a NodeClaim.
func (p *Provider) claimedMachines(ctx context.Context) ([]clusterv1.Machine, error) {
	var list clusterv1.MachineList
	if err := p.cfg.Management.List(ctx, &list, client.InNamespace(p.cfg.Namespace),
		client.MatchingLabels{clusterv1.ClusterNameLabel: p.cfg.Cluster}); err != nil {
		return nil, fmt.Errorf("list Machines: %w", err)
	}
	var out []clusterv1.Machine
	for _, m := range list.Items {
		if m.Annotations[AnnotationNodeClaim] != "" {
			out = append(out, m)
		}
	}
	return out, nil
}

// liveClaims counts the NodeClaims of a pool that are not being deleted.
func (p *Provider) liveClaims(ctx context.Context, poolName string) (int32, error) {
	var list karpv1.NodeClaimList
	if err := p.cfg.Guest.List(ctx, &list, client.MatchingLabels{karpv1.NodePoolLabelKey: KarpenterPoolName(poolName)}); err != nil {
		return 0, fmt.Errorf("list NodeClaims: %w", err)
	}
	var n int32
	for _, nc := range list.Items {
		if nc.DeletionTimestamp.IsZero() {
			n++
		}
	}
	return n, nil
}

// Create implements cloudprovider.CloudProvider: the pool grows by the NodeClaim, and the
// NodeClaim gets the new Machine.
func (p *Provider) Create(ctx context.Context, nc *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	name := poolOfClaim(nc)
	if name == "" {
		return p.createAutoNode(ctx, nc)
	}
	pl, err := p.pool(ctx, name)
	if err != nil {
		return nil, err
	}
	if pl == nil {
		return nil, cloudprovider.NewInsufficientCapacityError(fmt.Errorf("no autoscaled Hostplane NodePool %q behind Karpenter NodePool %q",
			name, nc.Labels[karpv1.NodePoolLabelKey]))
	}
	// A Create retried after a crash finds the Machine it claimed.
	if m, err := p.claimed(ctx, name, nc.Name); err != nil || m != nil {
		if err != nil {
			return nil, err
		}
		return p.waitProviderID(ctx, pl.it, nc, m.Name)
	}
	done, err := p.admit(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	claims, err := p.liveClaims(ctx, name)
	if err != nil {
		return nil, err
	}
	want := pl.min + claims
	if want > pl.max {
		return nil, cloudprovider.NewInsufficientCapacityError(fmt.Errorf("NodePool %s is at its maximum of %d machines", name, pl.max))
	}
	// Another NodeClaim's scale-up (or nodepoold) may have written the deployment since it
	// was read: read it again and scale over the newer version.
	reread := false
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if reread {
			if pl, err = p.pool(ctx, name); err != nil || pl == nil {
				return cmp.Or(err, fmt.Errorf("NodePool %s went away while scaling", name))
			}
		}
		reread = true
		return p.scale(ctx, pl.md, want, fmt.Sprintf("NodeClaim %s: pods that fit no node", nc.Name))
	})
	if err != nil {
		return nil, err
	}
	m, err := p.claimNew(ctx, pl, nc)
	done()
	if err != nil {
		return nil, err
	}
	log.FromContext(ctx).Info("launched a machine for the nodeclaim", "nodepool", name, "machine", m, "replicas", want)
	return p.waitProviderID(ctx, pl.it, nc, m)
}

// scale sets a MachineDeployment's replicas to at least want.
func (p *Provider) scale(ctx context.Context, md *clusterv1.MachineDeployment, want int32, reason string) error {
	if md.Spec.Replicas != nil && *md.Spec.Replicas >= want {
		return nil
	}
	return p.setReplicas(ctx, md, want, reason)
}

// setReplicas writes a MachineDeployment's replicas, refusing to if it changed since read,
// and records the change and its reason (api.AnnotationLastScale) for the pool's status.
func (p *Provider) setReplicas(ctx context.Context, md *clusterv1.MachineDeployment, n int32, reason string) error {
	patch := client.MergeFromWithOptions(md.DeepCopy(), client.MergeFromWithOptimisticLock{})
	var from int32
	if md.Spec.Replicas != nil {
		from = *md.Spec.Replicas
	}
	ev, err := json.Marshal(api.ScaleEvent{Time: time.Now().UTC().Truncate(time.Second), From: from, To: n, Reason: reason})
	if err != nil {
		return err
	}
	if md.Annotations == nil {
		md.Annotations = map[string]string{}
	}
	md.Annotations[api.AnnotationLastScale] = string(ev)
	md.Spec.Replicas = &n
	if err := p.cfg.Management.Patch(ctx, md, patch); err != nil {
		return fmt.Errorf("scale MachineDeployment %s to %d: %w", md.Name, n, err)
	}
	return nil
}

// claimed returns the Machine of a pool that claims the NodeClaim called claim, if any.
func (p *Provider) claimed(ctx context.Context, poolName, claim string) (*clusterv1.Machine, error) {
	ms, err := p.machines(ctx, poolName)
	if err != nil {
		return nil, err
	}
	for i := range ms {
		if ms[i].Annotations[AnnotationNodeClaim] == claim {
			return &ms[i], nil
		}
	}
	return nil, nil
}

// claimNew waits for a Machine of the pool that no NodeClaim has and that has not joined yet
// (the one the scale-up made), and claims it for nc. It returns the Machine's name. When no
// such Machine exists but the pool has more unclaimed Machines than min (a Create that failed
// after its scale-up, retried once the machine had joined), it claims the newest of those.
func (p *Provider) claimNew(ctx context.Context, pl *pool, nc *karpv1.NodeClaim) (string, error) {
	deadline := time.Now().Add(p.cfg.LaunchTimeout)
	for {
		ms, err := p.machines(ctx, pl.name)
		if err != nil {
			return "", err
		}
		var free, unclaimed []*clusterv1.Machine
		for i := range ms {
			m := &ms[i]
			if m.Annotations[AnnotationNodeClaim] != "" || !m.DeletionTimestamp.IsZero() {
				continue
			}
			if _, going := m.Annotations[clusterv1.DeleteMachineAnnotation]; going {
				continue
			}
			unclaimed = append(unclaimed, m)
			if m.Status.NodeRef.Name == "" {
				free = append(free, m)
			}
		}
		if len(free) == 0 && len(unclaimed) > int(pl.min) {
			free = unclaimed
		}
		// The newest first: it is the one this scale-up made.
		slices.SortFunc(free, func(a, b *clusterv1.Machine) int { return b.CreationTimestamp.Compare(a.CreationTimestamp.Time) })
		for _, m := range free {
			patch := client.MergeFromWithOptions(m.DeepCopy(), client.MergeFromWithOptimisticLock{})
			if m.Annotations == nil {
				m.Annotations = map[string]string{}
			}
			m.Annotations[AnnotationNodeClaim] = nc.Name
			err := p.cfg.Management.Patch(ctx, m, patch)
			if err == nil {
				return m.Name, nil
			}
			if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
				return "", fmt.Errorf("claim Machine %s: %w", m.Name, err)
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("no new Machine of NodePool %s within %s", pl.name, p.cfg.LaunchTimeout)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(p.cfg.Poll):
		}
	}
}

// waitProviderID waits until the claimed Machine has a provider ID and returns the NodeClaim
// as launched: the Machine's provider ID, the instance type's labels and capacity.
func (p *Provider) waitProviderID(ctx context.Context, it *cloudprovider.InstanceType, nc *karpv1.NodeClaim, machine string) (*karpv1.NodeClaim, error) {
	deadline := time.Now().Add(p.cfg.LaunchTimeout)
	for {
		var m clusterv1.Machine
		err := p.cfg.Management.Get(ctx, types.NamespacedName{Namespace: p.cfg.Namespace, Name: machine}, &m)
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("get Machine %s: %w", machine, err)
		}
		if apierrors.IsNotFound(err) || !m.DeletionTimestamp.IsZero() {
			return nil, fmt.Errorf("Machine %s of NodeClaim %s went away before it launched", machine, nc.Name)
		}
		if m.Spec.ProviderID != "" {
			return p.nodeClaim(&m, it), nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("Machine %s has no provider ID after %s", machine, p.cfg.LaunchTimeout)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(p.cfg.Poll):
		}
	}
}

// nodeClaim is what Karpenter learns of a claimed Machine of instance type it (one offering).
// it may be nil (the pool is gone): then only the identity is known.
func (p *Provider) nodeClaim(m *clusterv1.Machine, it *cloudprovider.InstanceType) *karpv1.NodeClaim {
	nc := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name:              m.Annotations[AnnotationNodeClaim],
			Labels:            map[string]string{},
			Annotations:       map[string]string{},
			CreationTimestamp: m.CreationTimestamp,
		},
		Status: karpv1.NodeClaimStatus{ProviderID: m.Spec.ProviderID},
	}
	if !m.DeletionTimestamp.IsZero() {
		nc.DeletionTimestamp = m.DeletionTimestamp
	}
	if it == nil {
		return nc
	}
	for _, r := range it.Requirements {
		if r.Len() == 1 && r.Operator() == corev1.NodeSelectorOpIn {
			nc.Labels[r.Key] = r.Values()[0]
		}
	}
	nc.Status.Capacity = it.Capacity.DeepCopy()
	nc.Status.Allocatable = it.Allocatable().DeepCopy()
	return nc
}

// Get implements cloudprovider.CloudProvider.
func (p *Provider) Get(ctx context.Context, providerID string) (*karpv1.NodeClaim, error) {
	ms, err := p.claimedMachines(ctx)
	if err != nil {
		return nil, err
	}
	for i := range ms {
		if ms[i].Spec.ProviderID == providerID {
			if isAutoNode(&ms[i]) {
				return p.nodeClaim(&ms[i], autoNodeType(&ms[i])), nil
			}
			pl, err := p.pool(ctx, ms[i].Labels[clusterv1.MachineDeploymentNameLabel])
			if err != nil || pl == nil {
				return p.nodeClaim(&ms[i], nil), err
			}
			return p.nodeClaim(&ms[i], pl.it), nil
		}
	}
	return nil, cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("no Machine with provider ID %s", providerID))
}

// List implements cloudprovider.CloudProvider: every claimed Machine with a provider ID.
func (p *Provider) List(ctx context.Context) ([]*karpv1.NodeClaim, error) {
	ms, err := p.claimedMachines(ctx)
	if err != nil {
		return nil, err
	}
	pools := map[string]*pool{}
	var out []*karpv1.NodeClaim
	for i := range ms {
		if ms[i].Spec.ProviderID == "" {
			continue
		}
		if isAutoNode(&ms[i]) {
			out = append(out, p.nodeClaim(&ms[i], autoNodeType(&ms[i])))
			continue
		}
		name := ms[i].Labels[clusterv1.MachineDeploymentNameLabel]
		pl, seen := pools[name]
		if !seen {
			if pl, err = p.pool(ctx, name); err != nil {
				return nil, err
			}
			pools[name] = pl
		}
		var it *cloudprovider.InstanceType
		if pl != nil {
			it = pl.it
		}
		out = append(out, p.nodeClaim(&ms[i], it))
	}
	return out, nil
}

// Delete implements cloudprovider.CloudProvider: the NodeClaim's Machine is marked for
// deletion and the pool shrinks by it (never below min). It reports NodeClaimNotFound once
// the Machine is gone.
func (p *Provider) Delete(ctx context.Context, nc *karpv1.NodeClaim) error {
	ms, err := p.claimedMachines(ctx)
	if err != nil {
		return err
	}
	m := machineOfClaim(ms, nc)
	if m == nil {
		return cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("no Machine for NodeClaim %s", nc.Name))
	}
	var pl *pool
	if poolName := m.Labels[clusterv1.MachineDeploymentNameLabel]; poolName != "" {
		if pl, err = p.pool(ctx, poolName); err != nil {
			return err
		}
	}
	if pl == nil {
		// An autoprovisioned machine, or one of a pool that no longer autoscales (or is
		// going): the Machine itself goes (and Cluster API replaces it if its pool still
		// wants it).
		if m.DeletionTimestamp.IsZero() {
			if err := p.cfg.Management.Delete(ctx, m); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("delete Machine %s: %w", m.Name, err)
			}
		}
		return nil
	}
	if _, marked := m.Annotations[clusterv1.DeleteMachineAnnotation]; !marked {
		patch := client.MergeFromWithOptions(m.DeepCopy(), client.MergeFromWithOptimisticLock{})
		m.Annotations[clusterv1.DeleteMachineAnnotation] = "nodeclaim " + nc.Name
		if err := p.cfg.Management.Patch(ctx, m, patch); err != nil {
			return fmt.Errorf("mark Machine %s for deletion: %w", m.Name, err)
		}
	}
	return p.shrink(ctx, pl, fmt.Sprintf("NodeClaim %s: node %s removed", nc.Name, nc.Status.NodeName))
}

// shrink lowers a pool's replicas to min plus its live NodeClaims when they are above it,
// after marking the Machines that go: first those marked already (deleted NodeClaims), then
// unclaimed ones at least a launch timeout old. It never touches a pool at or below that
// size: nodepoold keeps min.
func (p *Provider) shrink(ctx context.Context, pl *pool, reason string) error {
	poolName := pl.name
	claims, err := p.liveClaims(ctx, poolName)
	if err != nil {
		return err
	}
	want := min(pl.max, pl.min+claims)
	cur := int32(0)
	if pl.md.Spec.Replicas != nil {
		cur = *pl.md.Spec.Replicas
	}
	if cur <= want {
		return nil
	}
	ms, err := p.machines(ctx, poolName)
	if err != nil {
		return err
	}
	marked := 0
	for _, m := range ms {
		if _, ok := m.Annotations[clusterv1.DeleteMachineAnnotation]; ok && m.DeletionTimestamp.IsZero() {
			marked++
		}
	}
	// Then unclaimed machines (a scale-up whose Create failed, a claimed machine's replacement
	// after a repair): those that never joined first, before any Machine Cluster API would
	// pick itself.
	for _, joined := range []bool{false, true} {
		for i := range ms {
			if marked >= int(cur-want) {
				break
			}
			m := &ms[i]
			_, ok := m.Annotations[clusterv1.DeleteMachineAnnotation]
			if ok || m.Annotations[AnnotationNodeClaim] != "" || (m.Status.NodeRef.Name != "") != joined || !m.DeletionTimestamp.IsZero() {
				continue
			}
			if time.Since(m.CreationTimestamp.Time) < claimGrace {
				continue // perhaps a Create is about to claim it
			}
			patch := client.MergeFromWithOptions(m.DeepCopy(), client.MergeFromWithOptimisticLock{})
			if m.Annotations == nil {
				m.Annotations = map[string]string{}
			}
			m.Annotations[clusterv1.DeleteMachineAnnotation] = "unclaimed"
			if err := p.cfg.Management.Patch(ctx, m, patch); err != nil {
				return fmt.Errorf("mark Machine %s for deletion: %w", m.Name, err)
			}
			marked++
		}
	}
	if marked == 0 {
		return nil
	}
	return p.setReplicas(ctx, pl.md, max(want, cur-int32(marked)), reason)
}

// Reconcile is the provider's level-triggered repair: every autoscaled pool is shrunk back
// to min plus its live NodeClaims (a NodeClaim deleted while Hostplane was down, a scale-up
// whose Create failed). It returns the pools it looked at, for the guest's NodePools.
func (p *Provider) Reconcile(ctx context.Context) ([]PoolView, error) {
	pools, err := p.pools(ctx)
	if err != nil {
		return nil, err
	}
	var errs []error
	views := make([]PoolView, 0, len(pools))
	for _, pl := range pools {
		errs = append(errs, p.shrink(ctx, pl, "repair: back to min plus the live NodeClaims"))
		views = append(views, pl.view())
	}
	return views, errors.Join(errs...)
}
