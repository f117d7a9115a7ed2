// Package guest keeps what Karpenter needs in a guest cluster: its CRDs and Hostplane's node
// class CRD, the default node class, and one karpenter.sh NodePool for every autoscaled
// Hostplane NodePool, shaped after it.
package guest

import (
	"context"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/karpenter/pkg/apis"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/hostplane/hostplane/cmd/hostplane-karpenter/internal/nodeclass"
	"github.com/hostplane/hostplane/cmd/hostplane-karpenter/internal/provider"
	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/crd"
)

// LabelManagedBy marks the karpenter.sh NodePools this package writes.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "hostplane"
)

// InstallCRDs applies Karpenter's CRDs and Hostplane's node class CRD to the guest and waits
// until they are served.
func InstallCRDs(ctx context.Context, cfg *rest.Config) error {
	crds := []*apiextensionsv1.CustomResourceDefinition{nodeclass.CRD()}
	for _, c := range apis.CRDs {
		crds = append(crds, c.DeepCopy())
	}
	return crd.Apply(ctx, cfg, crds, "hostplane-karpenter")
}

// Options are the cluster's autoscaling options that shape every pool's karpenter.sh NodePool.
type Options struct {
	// ScaleDown false keeps every node Karpenter added (a disruption budget of 0 nodes).
	ScaleDown bool
	// UnneededTime is how long a node is empty or under-used before it goes (Karpenter's
	// consolidateAfter).
	UnneededTime time.Duration
	// MaxPodGracePeriod bounds how long a node that goes waits for its pods to end
	// (Karpenter's terminationGracePeriod; 0: no bound).
	MaxPodGracePeriod time.Duration
	// Interval is how often the pools are looked at (default 5s).
	Interval time.Duration
}

// Syncer keeps the guest's karpenter.sh NodePools in step with the autoscaled pools.
type Syncer struct {
	Guest    client.Client
	Provider *provider.Provider
	Options  Options
}

// Start runs until ctx ends (a controller-runtime Runnable).
func (s *Syncer) Start(ctx context.Context) error {
	interval := s.Options.Interval
	if interval <= 0 {
		interval = 5 * time.Second
	}
	lg := log.FromContext(ctx).WithName("hostplane-pools")
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := s.Sync(ctx); err != nil && ctx.Err() == nil {
			lg.Error(err, "syncing the autoscaled pools")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Sync lets the provider repair pool sizes, then writes the default node class and one
// NodePool per autoscaled pool and deletes the NodePools of pools that no longer autoscale.
func (s *Syncer) Sync(ctx context.Context) error {
	// Read from the manager's cache: a write only when the class is missing (deleted by hand).
	nc := nodeclass.Default()
	if err := s.Guest.Get(ctx, client.ObjectKeyFromObject(nc), &nodeclass.HostplaneNodeClass{}); apierrors.IsNotFound(err) {
		if err := s.Guest.Create(ctx, nc); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create node class %s: %w", nc.Name, err)
		}
	} else if err != nil {
		return fmt.Errorf("read node class %s: %w", nc.Name, err)
	}
	// The repair first, so the NodePools below follow the pools it read.
	pools, repairErr := s.Provider.Reconcile(ctx)
	if pools == nil && repairErr != nil {
		return repairErr
	}
	keep := map[string]bool{}
	for _, p := range pools {
		np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: provider.KarpenterPoolName(p.Name)}}
		keep[np.Name] = true
		if _, err := controllerutil.CreateOrUpdate(ctx, s.Guest, np, func() error {
			s.shape(np, p)
			return nil
		}); err != nil {
			return fmt.Errorf("write Karpenter NodePool %s: %w", np.Name, err)
		}
	}
	var list karpv1.NodePoolList
	if err := s.Guest.List(ctx, &list, client.MatchingLabels{LabelManagedBy: ManagedBy}); err != nil {
		return fmt.Errorf("list Karpenter NodePools: %w", err)
	}
	for i := range list.Items {
		if !keep[list.Items[i].Name] {
			if err := s.Guest.Delete(ctx, &list.Items[i]); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("delete Karpenter NodePool %s: %w", list.Items[i].Name, err)
			}
		}
	}
	return repairErr
}

// shape makes np stand for pool p: only p's instance type, p's labels and taints, at most
// max−min nodes (the first min are the pool's own), consolidated after the unneeded time.
func (s *Syncer) shape(np *karpv1.NodePool, p provider.PoolView) {
	if np.Labels == nil {
		np.Labels = map[string]string{}
	}
	maps.Copy(np.Labels, map[string]string{LabelManagedBy: ManagedBy, api.LabelNodePool: p.Name})
	labels := map[string]string{}
	for k, v := range p.Labels {
		if karpv1.IsRestrictedLabel(k) == nil && !karpv1.WellKnownLabels.Has(k) {
			labels[k] = v
		}
	}
	np.Spec.Template.Labels = labels
	np.Spec.Template.Spec.Taints = p.Taints
	np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{
		NodeSelectorRequirement: corev1.NodeSelectorRequirement{
			Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{p.InstanceType},
		},
	}}
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: nodeclass.Group, Kind: nodeclass.Kind, Name: nodeclass.DefaultName}
	np.Spec.Template.Spec.ExpireAfter = karpv1.MustParseNillableDuration("Never")
	np.Spec.Template.Spec.TerminationGracePeriod = nil
	if g := s.Options.MaxPodGracePeriod; g > 0 {
		np.Spec.Template.Spec.TerminationGracePeriod = &metav1.Duration{Duration: g}
	}
	np.Spec.Limits = karpv1.Limits{"nodes": *resource.NewQuantity(int64(p.Max-p.Min), resource.DecimalSI)}
	np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized
	np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration(s.Options.UnneededTime.String())
	budget := "10%"
	if !s.Options.ScaleDown {
		budget = "0"
	}
	np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: budget}}
}
