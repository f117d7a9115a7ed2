package kuberuntime

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/hostplane/hostplane/pkg/api"
)

// ComponentStatus is one component's workload as the management cluster reports it.
type ComponentStatus struct {
	// Kind is "StatefulSet" (etcd) or "Deployment".
	Kind string
	// Image is the component's image in the pod template.
	Image string
	// ConfigHash is the config hash of the pod template the apiserver holds (what Apply
	// last wrote); the pods run it once RolloutComplete.
	ConfigHash string
	// Replicas is the desired count; Ready, Updated and Available count pods that are ready,
	// run the current template, and have been ready long enough.
	Replicas, ReadyReplicas, UpdatedReplicas, AvailableReplicas int32
	// Generation is the object's; ObservedGeneration the one its controller last acted on.
	Generation, ObservedGeneration int64
	// RolloutComplete: the controller has seen the current template and every desired
	// replica runs it and is ready, with no old replica left.
	RolloutComplete bool
	// Available: enough replicas are ready to serve (etcd: a quorum; others: one).
	Available bool
}

// Status reports every component of cluster that has a workload; a component without one
// (never applied, or deleted) is absent from the map.
func (r *Runtime) Status(ctx context.Context, cluster string) (map[string]ComponentStatus, error) {
	ns := Namespace(cluster)
	out := map[string]ComponentStatus{}
	sts, err := r.cs.AppsV1().StatefulSets(ns).List(ctx, ownedBy(cluster))
	if err != nil {
		return nil, fmt.Errorf("list statefulsets in %s: %w", ns, err)
	}
	for i := range sts.Items {
		s := &sts.Items[i]
		c := s.Labels[LabelComponent]
		out[c] = statefulSetStatus(s, c)
	}
	deps, err := r.cs.AppsV1().Deployments(ns).List(ctx, ownedBy(cluster))
	if err != nil {
		return nil, fmt.Errorf("list deployments in %s: %w", ns, err)
	}
	for i := range deps.Items {
		d := &deps.Items[i]
		c := d.Labels[LabelComponent]
		out[c] = deploymentStatus(d, c)
	}
	return out, nil
}

func replicasOf(p *int32) int32 {
	if p == nil {
		return 1
	}
	return *p
}

func statefulSetStatus(s *appsv1.StatefulSet, component string) ComponentStatus {
	st := s.Status
	cs := workloadStatus("StatefulSet", component, s.Spec.Replicas, s.Spec.Template, s.Generation,
		st.ObservedGeneration, st.ReadyReplicas, st.UpdatedReplicas, st.AvailableReplicas)
	want := cs.Replicas
	cs.RolloutComplete = st.ObservedGeneration >= s.Generation && st.UpdateRevision != "" &&
		st.CurrentRevision == st.UpdateRevision && st.Replicas == want &&
		st.UpdatedReplicas == want && st.ReadyReplicas == want
	need := int32(1)
	if component == api.ComponentEtcd {
		need = want/2 + 1 // a quorum
	}
	cs.Available = want > 0 && st.ReadyReplicas >= need
	return cs
}

func deploymentStatus(d *appsv1.Deployment, component string) ComponentStatus {
	st := d.Status
	cs := workloadStatus("Deployment", component, d.Spec.Replicas, d.Spec.Template, d.Generation,
		st.ObservedGeneration, st.ReadyReplicas, st.UpdatedReplicas, st.AvailableReplicas)
	want := cs.Replicas
	cs.RolloutComplete = st.ObservedGeneration >= d.Generation && st.Replicas == want &&
		st.UpdatedReplicas == want && st.ReadyReplicas == want && st.AvailableReplicas == want
	cs.Available = want > 0 && st.AvailableReplicas >= 1
	return cs
}

// workloadStatus is what a StatefulSet's and a Deployment's status have in common; the
// caller decides RolloutComplete and Available, which differ.
func workloadStatus(kind, component string, replicas *int32, tpl corev1.PodTemplateSpec, generation, observed int64,
	ready, updated, available int32) ComponentStatus {
	return ComponentStatus{
		Kind:               kind,
		Image:              containerImage(tpl.Spec, component),
		ConfigHash:         tpl.Annotations[AnnotationConfigHash],
		Replicas:           replicasOf(replicas),
		ReadyReplicas:      ready,
		UpdatedReplicas:    updated,
		AvailableReplicas:  available,
		Generation:         generation,
		ObservedGeneration: observed,
	}
}
