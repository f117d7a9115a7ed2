package nodepoold

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	kubedrain "k8s.io/kubectl/pkg/drain"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostplane/hostplane/pkg/api"
)

// Annotations of the in-place updater.
const (
	// AnnotationInPlaceTarget on a Machine names the config hash its Node is being cordoned
	// and drained for; AnnotationInPlaceDrainStarted says since when (RFC 3339).
	AnnotationInPlaceTarget       = "hostplane.dev/inplace-target"
	AnnotationInPlaceDrainStarted = "hostplane.dev/inplace-drain-started"
	// AnnotationCordonedBy on a Node says nodepoold cordoned it for an in-place update, so
	// only such a Node is uncordoned afterwards.
	AnnotationCordonedBy = "hostplane.dev/cordoned-by"
)

// inPlaceProgress is what the in-place updater did and waits for.
type inPlaceProgress struct {
	active  int      // machines being drained or applying the new config
	pending int      // machines still to update
	waiting []string // what the active ones wait for, for the UpdatingConfig condition
}

// updateInPlace moves an InPlace pool's machines to its current config, maxUnavailable at a
// time: cordon and drain the Node (evictions honour PodDisruptionBudgets, bounded by
// nodeDrainTimeout), then annotate the Machine with the desired config and userdata (infrad
// relays them to the machine, which re-fetches Ignition and reports the applied hash on its
// Node), wait for the Node to report it, uncordon, next.
func (d *Daemon) updateInPlace(ctx context.Context, s *scope) {
	st := s.state
	c := d.mgmt.client()
	secret := api.UserDataSecretName(s.np.Name, s.hash)
	limit := int(api.DefaultInPlaceMaxUnavailable)
	if ip := s.np.Spec.Management.InPlace; ip != nil && ip.MaxUnavailable != nil {
		limit = int(*ip.MaxUnavailable)
	}
	var cs kubernetes.Interface
	if gc, err := d.guestClients(); err == nil {
		if g, err := gc.For(ctx, s.np.Cluster); err == nil {
			cs = g.Clientset
		}
	}

	var pending []*clusterv1.Machine
	live := st.liveMachines()
	for i := range live {
		m := &live[i]
		n := st.node(m)
		desired := m.Annotations[api.AnnotationDesiredConfig]
		switch {
		case desired == "" && m.Spec.Bootstrap.DataSecretName != nil && *m.Spec.Bootstrap.DataSecretName == secret:
			// Born from the current template: it boots the current config already.
			if err := annotateMachine(ctx, c, m, map[string]any{api.AnnotationDesiredConfig: s.hash, api.AnnotationDesiredUserData: secret}); err != nil {
				s.fail("adopt machine "+m.Name, err)
			}
		case desired == s.hash && n != nil && api.RunsConfig(n.Labels, n.Annotations, s.hash):
			d.finishInPlace(ctx, s, cs, m, n)
		case desired == s.hash && m.Spec.Bootstrap.DataSecretName != nil && *m.Spec.Bootstrap.DataSecretName == secret:
			// Born from the current template and still joining: not an update.
		case desired == s.hash:
			s.inPlace.active++
			s.inPlace.waiting = append(s.inPlace.waiting, fmt.Sprintf("machine %s: applying config %s", m.Name, short(s.hash)))
		case m.Annotations[AnnotationInPlaceTarget] == s.hash:
			s.inPlace.active++
			d.drainStep(ctx, s, cs, m, n)
		default:
			pending = append(pending, m)
		}
	}
	for _, m := range pending {
		if s.inPlace.active >= limit {
			s.inPlace.pending++
			continue
		}
		s.inPlace.active++
		n := st.node(m)
		if n == nil {
			// No Node to drain (still booting, or the guest cluster is unreadable and
			// Cluster API never saw one): hand it the new config at once.
			if m.Status.NodeRef.Name != "" && st.nodes == nil {
				s.inPlace.active--
				s.inPlace.pending++
				continue
			}
			if err := d.setDesired(ctx, c, m, s.hash, secret); err != nil {
				s.fail("update machine "+m.Name, err)
			}
			continue
		}
		if err := annotateMachine(ctx, c, m, map[string]any{
			AnnotationInPlaceTarget: s.hash, AnnotationInPlaceDrainStarted: s.now.Format(time.RFC3339),
		}); err != nil {
			s.fail("start updating machine "+m.Name, err)
			continue
		}
		s.log.InfoContext(ctx, "in-place update started", "machine", m.Name, "node", n.Name, "config", short(s.hash))
		d.metrics.inPlaceStarted.Inc()
		d.drainStep(ctx, s, cs, m, n)
	}
}

// drainStep cordons and drains a Machine's Node; once drained (or nodeDrainTimeout passed)
// it hands the Machine the new config.
func (d *Daemon) drainStep(ctx context.Context, s *scope, cs kubernetes.Interface, m *clusterv1.Machine, n *corev1.Node) {
	c := d.mgmt.client()
	secret := api.UserDataSecretName(s.np.Name, s.hash)
	if n == nil {
		if err := d.setDesired(ctx, c, m, s.hash, secret); err != nil {
			s.fail("update machine "+m.Name, err)
		}
		return
	}
	if cs == nil {
		s.inPlace.waiting = append(s.inPlace.waiting, fmt.Sprintf("machine %s: waiting for the guest cluster to drain node %s", m.Name, n.Name))
		return
	}
	if err := cordon(ctx, cs, n, true); err != nil {
		s.fail("cordon node "+n.Name, err)
		return
	}
	left, err := drain(ctx, cs, n.Name)
	if err != nil {
		s.fail("drain node "+n.Name, err)
	}
	if left > 0 {
		started, _ := time.Parse(time.RFC3339, m.Annotations[AnnotationInPlaceDrainStarted])
		timeout := seconds(s.np.Spec.NodeDrainTimeout)
		if timeout == nil || *timeout == 0 || started.IsZero() || s.now.Sub(started) < time.Duration(*timeout)*time.Second {
			s.inPlace.waiting = append(s.inPlace.waiting, fmt.Sprintf("machine %s: draining node %s (%d pods left)", m.Name, n.Name, left))
			return
		}
		s.log.WarnContext(ctx, "drain timed out; updating anyway", "machine", m.Name, "node", n.Name, "pods_left", left)
	}
	if err := d.setDesired(ctx, c, m, s.hash, secret); err != nil {
		s.fail("update machine "+m.Name, err)
		return
	}
	s.inPlace.waiting = append(s.inPlace.waiting, fmt.Sprintf("machine %s: applying config %s", m.Name, short(s.hash)))
}

// setDesired asks a machine (through infrad) to apply a config.
func (d *Daemon) setDesired(ctx context.Context, c client.Client, m *clusterv1.Machine, hash, secret string) error {
	return annotateMachine(ctx, c, m, map[string]any{api.AnnotationDesiredConfig: hash, api.AnnotationDesiredUserData: secret})
}

// finishInPlace uncordons a Node the updater cordoned once it runs the new config, and clears
// the Machine's updater annotations.
func (d *Daemon) finishInPlace(ctx context.Context, s *scope, cs kubernetes.Interface, m *clusterv1.Machine, n *corev1.Node) {
	if n.Annotations[AnnotationCordonedBy] == Name {
		if cs == nil {
			return
		}
		if err := cordon(ctx, cs, n, false); err != nil {
			s.fail("uncordon node "+n.Name, err)
			return
		}
		s.log.InfoContext(ctx, "in-place update finished", "machine", m.Name, "node", n.Name, "config", short(s.hash))
		d.metrics.inPlaceFinished.Inc()
	}
	if m.Annotations[AnnotationInPlaceTarget] != "" || m.Annotations[AnnotationInPlaceDrainStarted] != "" {
		if err := annotateMachine(ctx, d.mgmt.client(), m, map[string]any{AnnotationInPlaceTarget: nil, AnnotationInPlaceDrainStarted: nil}); err != nil {
			s.fail("finish machine "+m.Name, err)
		}
	}
}

// annotateMachine merges annotations into a Machine (nil removes one).
func annotateMachine(ctx context.Context, c client.Client, m *clusterv1.Machine, annotations map[string]any) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	if err != nil {
		return err
	}
	if err := c.Patch(ctx, m, client.RawPatch(types.MergePatchType, patch)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("annotate Machine %s: %w", m.Name, err)
	}
	return nil
}

// cordon marks a Node unschedulable (as nodepoold's) or, off, schedulable again.
func cordon(ctx context.Context, cs kubernetes.Interface, n *corev1.Node, on bool) error {
	if on && n.Spec.Unschedulable && n.Annotations[AnnotationCordonedBy] != "" {
		return nil
	}
	var owner any
	if on {
		owner = Name
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{AnnotationCordonedBy: owner}},
		"spec":     map[string]any{"unschedulable": on},
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, guestTimeout)
	defer cancel()
	_, err = cs.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: Name})
	return err
}

// drain evicts the pods of a Node that kubectl drain would move (its filters: not mirror
// pods, DaemonSet pods or finished ones; unmanaged pods and emptyDir data are not an obstacle)
// and returns how many are still there. It does not wait: evictions honour
// PodDisruptionBudgets, and a refused one is retried at the next reconcile.
func drain(ctx context.Context, cs kubernetes.Interface, node string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, guestTimeout)
	defer cancel()
	h := &kubedrain.Helper{
		Ctx: ctx, Client: cs, Force: true, IgnoreAllDaemonSets: true, DeleteEmptyDirData: true,
		GracePeriodSeconds: -1, Out: io.Discard, ErrOut: io.Discard,
	}
	list, errs := h.GetPodsForDeletion(node)
	if len(errs) > 0 {
		return 0, fmt.Errorf("pods of node %s: %w", node, errors.Join(errs...))
	}
	left := 0
	var firstErr error
	for _, p := range list.Pods() {
		if p.DeletionTimestamp != nil {
			continue // evicted already, terminating
		}
		err := h.EvictPod(p, policyv1.SchemeGroupVersion)
		switch {
		case err == nil || apierrors.IsNotFound(err):
		case apierrors.IsTooManyRequests(err): // a PodDisruptionBudget refuses it for now
			left++
		default:
			left++
			if firstErr == nil {
				firstErr = fmt.Errorf("evict %s/%s: %w", p.Namespace, p.Name, err)
			}
		}
	}
	return left, firstErr
}

// short is the first 8 characters of a hash, as in the userdata Secret's name.
func short(hash string) string {
	if len(hash) > 8 {
		return hash[:8]
	}
	return hash
}
