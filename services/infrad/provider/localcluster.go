package provider

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/hostplane/hostplane/apis/infrastructure/v1alpha1"
	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/daemon"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/reconcile"
	"github.com/hostplane/hostplane/pkg/store"
)

// LocalClusterController returns the NATS controller that writes the clusters' LocalClusters
// (one per cluster whose infra record is ready, in the cluster's namespace) on cluster and
// infra events. Its durable consumer is "<Owner>-localcluster".
func (p *Provider) LocalClusterController(rt *daemon.Runtime) (*reconcile.Controller, error) {
	return rt.Controller(reconcile.Config{
		Name:           p.owner + "-localcluster",
		FilterSubjects: []string{events.ResourceFilter(events.ResourceCluster), events.ResourceFilter(events.ResourceInfra)},
		ListKeys:       p.localClusterKeys,
	}, reconcile.Func(p.reconcileLocalCluster))
}

// localClusterKeys is every cluster with a record plus every LocalCluster infrad wrote (so
// one whose cluster vanished while infrad was down is removed).
func (p *Provider) localClusterKeys(ctx context.Context) ([]string, error) {
	keys, err := reconcile.ClusterKeys(p.infra, p.clusters)(ctx)
	if err != nil || !p.started.Load() {
		return keys, err
	}
	var list infrav1.LocalClusterList
	if err := p.reader.List(ctx, &list, client.MatchingLabels{api.LabelOwner: p.owner}); err != nil {
		return nil, fmt.Errorf("list LocalClusters: %w", err)
	}
	for _, lc := range list.Items {
		if c := lc.Labels[api.LabelCluster]; c != "" {
			keys = append(keys, c)
		}
	}
	return keys, nil
}

// reconcileLocalCluster makes the cluster's LocalCluster follow its infra record: written
// once the record is ready (never again once the cluster is deleting: Cluster API deletes
// it then), deleted once the record or the cluster is gone.
func (p *Provider) reconcileLocalCluster(ctx context.Context, cluster string) (reconcile.Result, error) {
	if !p.started.Load() {
		return reconcile.Result{RequeueAfter: time.Second}, nil
	}
	c, _, err := p.clusters.Get(ctx, cluster)
	clusterGone := errors.Is(err, store.ErrNotFound)
	if err != nil && !clusterGone {
		return reconcile.Result{}, err
	}
	inf, _, err := p.infra.Get(ctx, cluster)
	infraGone := errors.Is(err, store.ErrNotFound)
	if err != nil && !infraGone {
		return reconcile.Result{}, err
	}
	switch {
	case clusterGone || infraGone:
		return reconcile.Result{}, p.deleteLocalCluster(ctx, cluster)
	case c.DeletionTimestamp != nil || !inf.Ready:
		return reconcile.Result{}, nil
	}
	return reconcile.Result{}, p.applyLocalCluster(ctx, cluster, inf)
}

// applyLocalCluster writes the LocalCluster (and its namespace, if missing) with
// server-side apply: spec.controlPlaneEndpoint, then status.initialization.provisioned.
func (p *Provider) applyLocalCluster(ctx context.Context, cluster string, inf *api.Infra) error {
	ns := api.ControlPlaneNamespace(cluster)
	if err := p.ensureNamespace(ctx, ns, cluster); err != nil {
		return err
	}
	obj := func() *infrav1.LocalCluster {
		return &infrav1.LocalCluster{
			TypeMeta:   metav1.TypeMeta{APIVersion: infrav1.GroupVersion.String(), Kind: api.KindLocalCluster},
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cluster},
		}
	}
	spec := obj()
	spec.Labels = map[string]string{api.LabelOwner: p.owner, api.LabelCluster: cluster, clusterv1.ClusterNameLabel: cluster}
	spec.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: inf.Endpoint.Host, Port: int32(inf.Endpoint.Port)}
	opts := []client.PatchOption{client.FieldOwner(p.owner), client.ForceOwnership}
	if err := p.client.Patch(ctx, spec, client.Apply, opts...); err != nil {
		return fmt.Errorf("apply LocalCluster %s/%s: %w", ns, cluster, err)
	}
	status := obj()
	status.Status = infrav1.LocalClusterStatus{
		Initialization: infrav1.Initialization{Provisioned: ptr.To(true)},
		Conditions:     localClusterConditions(spec),
	}
	if err := p.client.Status().Patch(ctx, status, client.Apply, client.FieldOwner(p.owner), client.ForceOwnership); err != nil {
		return fmt.Errorf("apply LocalCluster %s/%s status: %w", ns, cluster, err)
	}
	return nil
}

// localClusterConditions are the LocalCluster's v1beta2 conditions: Ready True once its
// endpoint is allocated, as Cluster API's tools (clusterctl describe cluster) show an
// infrastructure cluster by its Ready condition (no message: Cluster API's convention for a
// healthy condition, whose message would reach the Cluster's Available summary). cur is the LocalCluster as the apiserver
// answered the spec's apply; its Ready condition's lastTransitionTime is kept while the
// status stays the same.
func localClusterConditions(cur *infrav1.LocalCluster) []metav1.Condition {
	since := metav1.NewTime(time.Now().UTC().Truncate(time.Second))
	if c := meta.FindStatusCondition(cur.Status.Conditions, infrav1.ConditionReady); c != nil && c.Status == metav1.ConditionTrue {
		since = c.LastTransitionTime
	}
	return []metav1.Condition{{
		Type: infrav1.ConditionReady, Status: metav1.ConditionTrue, Reason: infrav1.ReasonProvisioned,
		ObservedGeneration: cur.Generation, LastTransitionTime: since,
	}}
}

// deleteLocalCluster deletes the cluster's LocalCluster; gone already (Cluster API deleted it
// with the Cluster) is fine: it carries no finalizer.
func (p *Provider) deleteLocalCluster(ctx context.Context, cluster string) error {
	lc := &infrav1.LocalCluster{ObjectMeta: metav1.ObjectMeta{Namespace: api.ControlPlaneNamespace(cluster), Name: cluster}}
	err := p.client.Delete(ctx, lc)
	if err == nil {
		p.log.Info("deleted the LocalCluster", "cluster", cluster)
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete LocalCluster of %s: %w", cluster, err)
	}
	return nil
}

// ensureNamespace creates the cluster's namespace unless it exists (another daemon may have
// created it; infrad never changes or deletes it).
func (p *Provider) ensureNamespace(ctx context.Context, ns, cluster string) error {
	obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{
		api.LabelOwner: p.owner, api.LabelCluster: cluster,
	}}}
	if err := p.client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", ns, err)
	}
	return nil
}
