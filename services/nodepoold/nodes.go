package nodepoold

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/store"
)

// Annotations on a guest Node listing what nodepoold set on it, so that a label or taint
// removed from the pool's spec is removed from the Node too (and nothing else is).
const (
	AnnotationManagedLabels = "hostplane.dev/managed-labels" // comma-separated keys
	AnnotationManagedTaints = "hostplane.dev/managed-taints" // comma-separated key:effect
)

// syncNodes gives every Node of the pool the pool's labels and taints, in place (no rollout:
// they are not part of the config hash), and the hostplane.dev/nodepool label.
func (d *Daemon) syncNodes(ctx context.Context, s *scope) {
	st := s.state
	if st == nil || st.nodes == nil {
		return
	}
	gc, err := d.guestClients()
	if err != nil {
		return
	}
	g, err := gc.For(ctx, s.np.Cluster)
	if err != nil {
		return
	}
	for _, n := range poolNodes(s) {
		if err := syncNode(ctx, g.Clientset, n, s.np); err != nil {
			s.fail("label node "+n.Name, err)
		}
	}
}

// syncNode patches one Node, re-reading it when it changed meanwhile (the machine renews its
// status all the time), as often as client-go's retry.DefaultRetry allows.
func syncNode(ctx context.Context, cs kubernetes.Interface, n *corev1.Node, np *api.NodePool) error {
	return store.RetryOnConflict(apierrors.IsConflict, func() error {
		patch, ok := nodePatch(n, np)
		if !ok {
			return nil
		}
		err := patchNode(ctx, cs, n.Name, patch)
		if !apierrors.IsConflict(err) {
			return err
		}
		gctx, cancel := context.WithTimeout(ctx, guestTimeout)
		defer cancel()
		fresh, gerr := cs.CoreV1().Nodes().Get(gctx, n.Name, metav1.GetOptions{})
		if gerr != nil {
			return fmt.Errorf("get node: %w", gerr)
		}
		n = fresh
		return err
	})
}

// poolNodes are the Nodes of the pool: those of its live Machines, or on platform none
// (machines the user provisions) those labelled with the pool.
func poolNodes(s *scope) []*corev1.Node {
	st := s.state
	var out []*corev1.Node
	if !api.ProvidesMachines(s.np.Spec.Platform.Type) {
		for _, name := range slices.Sorted(maps.Keys(st.nodes)) {
			if n := st.nodes[name]; n.Labels[api.LabelNodePool] == s.np.Name {
				out = append(out, n)
			}
		}
		return out
	}
	live := st.liveMachines()
	for i := range live {
		if n := st.node(&live[i]); n != nil {
			out = append(out, n)
		}
	}
	return out
}

// nodePatch is the merge patch that gives n the pool's labels and taints, or false when it
// has them. The Node's resourceVersion guards the taint list (written whole).
func nodePatch(n *corev1.Node, np *api.NodePool) (map[string]any, bool) {
	labels := map[string]any{}
	oldLabels := splitList(n.Annotations[AnnotationManagedLabels])
	for _, k := range oldLabels {
		if _, keep := np.Spec.NodeLabels[k]; !keep {
			if _, has := n.Labels[k]; has {
				labels[k] = nil
			}
		}
	}
	want := maps.Clone(np.Spec.NodeLabels)
	if want == nil {
		want = map[string]string{}
	}
	want[api.LabelNodePool] = np.Name
	for k, v := range want {
		if cur, has := n.Labels[k]; !has || cur != v {
			labels[k] = v
		}
	}
	managedLabels := strings.Join(slices.Sorted(maps.Keys(np.Spec.NodeLabels)), ",")

	taints, taintsChanged := mergeTaints(n.Spec.Taints, splitList(n.Annotations[AnnotationManagedTaints]), np.Spec.Taints)
	var taintIDs []string
	for _, t := range np.Spec.Taints {
		taintIDs = append(taintIDs, t.Key+":"+t.Effect)
	}
	slices.Sort(taintIDs)
	managedTaints := strings.Join(taintIDs, ",")

	annotations := map[string]any{}
	if n.Annotations[AnnotationManagedLabels] != managedLabels {
		annotations[AnnotationManagedLabels] = emptyToNil(managedLabels)
	}
	if n.Annotations[AnnotationManagedTaints] != managedTaints {
		annotations[AnnotationManagedTaints] = emptyToNil(managedTaints)
	}
	if len(labels) == 0 && len(annotations) == 0 && !taintsChanged {
		return nil, false
	}
	md := map[string]any{"resourceVersion": n.ResourceVersion}
	if len(labels) > 0 {
		md["labels"] = labels
	}
	if len(annotations) > 0 {
		md["annotations"] = annotations
	}
	patch := map[string]any{"metadata": md}
	if taintsChanged {
		list := make([]any, 0, len(taints))
		for _, t := range taints {
			list = append(list, t)
		}
		patch["spec"] = map[string]any{"taints": list}
	}
	return patch, true
}

// mergeTaints returns the Node's taints with the pool's (want) applied: a taint nodepoold set
// before (managed, "key:effect") and no longer wanted goes; a wanted one is added or gets its
// value; every other taint (the node lifecycle controller's, a user's) stays as it is.
func mergeTaints(cur []corev1.Taint, managed []string, want []api.Taint) ([]corev1.Taint, bool) {
	wanted := map[string]api.Taint{}
	for _, t := range want {
		wanted[t.Key+":"+t.Effect] = t
	}
	var out []corev1.Taint
	changed := false
	seen := map[string]bool{}
	for _, t := range cur {
		id := t.Key + ":" + string(t.Effect)
		if w, ok := wanted[id]; ok {
			seen[id] = true
			if t.Value != w.Value {
				t.Value = w.Value
				changed = true
			}
			out = append(out, t)
			continue
		}
		if slices.Contains(managed, id) {
			changed = true
			continue
		}
		out = append(out, t)
	}
	for _, w := range want {
		if id := w.Key + ":" + w.Effect; !seen[id] {
			seen[id] = true
			out = append(out, corev1.Taint{Key: w.Key, Value: w.Value, Effect: corev1.TaintEffect(w.Effect)})
			changed = true
		}
	}
	return out, changed
}

// patchNode sends a merge patch to a guest Node.
func patchNode(ctx context.Context, cs kubernetes.Interface, name string, patch map[string]any) error {
	b, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, guestTimeout)
	defer cancel()
	if _, err := cs.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, b, metav1.PatchOptions{FieldManager: Name}); err != nil {
		return fmt.Errorf("patch node %s: %w", name, err)
	}
	return nil
}

func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func emptyToNil(s string) any {
	if s == "" {
		return nil
	}
	return s
}
