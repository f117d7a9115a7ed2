package componentd

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/outbox"
	"github.com/hostplane/hostplane/pkg/release"
	"github.com/hostplane/hostplane/pkg/store"
	"github.com/hostplane/hostplane/services/componentd/internal/component"
	"github.com/hostplane/hostplane/services/componentd/internal/rollout"
	"github.com/hostplane/hostplane/services/componentd/procruntime"
)

// Event verbs componentd publishes (resource "component", key "<cluster>/<component>").
const (
	VerbAvailable   = "available"
	VerbProgressing = "progressing"
	VerbDegraded    = "degraded"
	VerbDeleted     = "deleted"
)

// Condition reasons.
const (
	ReasonAsExpected             = "AsExpected"
	ReasonWaitingForDependencies = "WaitingForDependencies"
	ReasonReplicasNotReady       = "ReplicasNotReady"
	ReasonRollingOut             = "RollingOut"
	// ReasonCrashLooping: a replica that is not ready restarted again and again (the process
	// runtime).
	ReasonCrashLooping = procruntime.ReasonCrashLooping
	// ReasonIdle: the component wants no replica now (the autoscaler of a cluster without an
	// autoscaled node pool); nothing runs and nothing is missing.
	ReasonIdle = "Idle"
)

// record computes the component's record from o, stores it when it changed and publishes an
// event when its Available, RolloutComplete or Degraded condition changed. Every runtime
// records through it.
func (d *Daemon) record(ctx context.Context, log *slog.Logger, cluster string,
	old *store.Entry[api.ControlPlaneComponent], o component.Observation) error {
	comp, sum := o.Component, o.Summary
	now := time.Now().UTC()

	var next api.ControlPlaneComponent
	if old != nil {
		if err := deepCopy(old.Value, &next); err != nil {
			return err
		}
	} else {
		next = api.ControlPlaneComponent{ObjectMeta: api.ObjectMeta{Name: comp.Name}, Cluster: cluster}
	}
	spec := api.ControlPlaneComponentSpec{
		Version: o.Version, Replicas: o.Replicas, DependsOn: comp.DependsOn, ConfigHash: o.Hash,
	}
	if old != nil && !jsonEqual(old.Value.Spec, spec) {
		next.Generation++
	}
	next.Spec = spec

	st := &next.Status
	st.ObservedGeneration = next.Generation
	st.ReadyReplicas = sum.Ready
	if sum.Complete {
		st.Version = o.Version
		st.PKISerial = o.PKISerial
	}
	st.Replicas = o.ReplicaStatus

	gen := next.Generation
	set := func(t string, ok bool, reason, msg string) {
		status := api.ConditionFalse
		if ok {
			status = api.ConditionTrue
		}
		st.Conditions.Set(api.Condition{Type: t, Status: status, Reason: reason, Message: msg, ObservedGeneration: gen}, now)
	}
	idle := o.Replicas == 0 && sum.Ready == 0
	if idle {
		st.Version = o.Version
	}
	switch {
	case idle:
		set(api.ConditionAvailable, true, ReasonIdle, "no replica wanted now")
	case sum.Available:
		set(api.ConditionAvailable, true, ReasonAsExpected, fmt.Sprintf("%d of %d replicas ready", sum.Ready, o.Replicas))
	case !o.Gate.Available && sum.Ready == 0:
		waitingFor := o.WaitingFor
		if waitingFor == nil {
			waitingFor = comp.StartsAfter()
		}
		set(api.ConditionAvailable, false, ReasonWaitingForDependencies, "waiting for "+strings.Join(waitingFor, ", ")+" to be Available")
	default:
		set(api.ConditionAvailable, false, ReasonReplicasNotReady, fmt.Sprintf("%d of %d replicas ready, %d needed%s",
			sum.Ready, o.Replicas, comp.Quorum(o.Replicas), o.NotReady))
	}
	switch {
	case idle:
		set(api.ConditionRolloutComplete, true, ReasonIdle, "no replica wanted now")
	case sum.Complete:
		set(api.ConditionRolloutComplete, true, ReasonAsExpected, fmt.Sprintf("%d replicas ready at version %s, config %s", o.Replicas, o.Version, o.Hash))
	case !o.Gate.Settled:
		set(api.ConditionRolloutComplete, false, ReasonWaitingForDependencies, fmt.Sprintf("%d of %d replicas at config %s; waiting for %s to finish rolling out",
			sum.Updated, o.Replicas, o.Hash, strings.Join(comp.DependsOn, ", ")))
	default:
		set(api.ConditionRolloutComplete, false, ReasonRollingOut, fmt.Sprintf("%d of %d replicas ready at version %s, config %s", sum.Updated, o.Replicas, o.Version, o.Hash))
	}
	if o.Degraded != "" {
		set(api.ConditionDegraded, true, o.DegradedReason, o.Degraded)
	} else {
		set(api.ConditionDegraded, false, ReasonAsExpected, "")
	}

	d.metrics.observeReplicas(cluster, comp.Name, o.Replicas, sum.Ready, sum.Updated)
	d.observeMetrics(cluster, comp.Name, old, &next, now)
	return d.save(ctx, log, cluster, old, &next, "available", sum.Available, "rollout_complete", sum.Complete,
		"ready", sum.Ready, "replicas", o.Replicas, "version", o.Version, "config_hash", o.Hash)
}

// recordReleaseNotBuilt records a component whose release has no binaries on this host yet.
// A component not started yet is unavailable with reason ReleaseNotBuilt; one that runs an
// older release keeps running and keeps its Available condition, and its rollout waits with
// that reason. The returned summary gates the components that depend on it.
func (d *Daemon) recordReleaseNotBuilt(ctx context.Context, log *slog.Logger, cluster string, comp *component.Component,
	in *component.Inputs, old *store.Entry[api.ControlPlaneComponent]) (rollout.Summary, error) {
	rel, err := release.Lookup(in.Version)
	if err != nil {
		return rollout.Summary{}, err
	}
	_, msg := binariesState(rel)
	return d.recordCannotRun(ctx, log, cluster, comp, in, old, ReasonReleaseNotBuilt, msg)
}

// recordCannotRun records that a component cannot start here (reason, msg): whatever of it
// runs keeps running, and its conditions say why nothing more happens.
func (d *Daemon) recordCannotRun(ctx context.Context, log *slog.Logger, cluster string, comp *component.Component,
	in *component.Inputs, old *store.Entry[api.ControlPlaneComponent], reason, msg string) (rollout.Summary, error) {
	return d.recordDown(ctx, log, cluster, comp, in, old, reason, msg, true)
}

// recordDown records a component whose rollout cannot go on (reason, msg); keepAvailable
// keeps an Available condition that is True (what runs keeps running), else the component
// is recorded unavailable too (its processes are being stopped, as for a restore).
func (d *Daemon) recordDown(ctx context.Context, log *slog.Logger, cluster string, comp *component.Component,
	in *component.Inputs, old *store.Entry[api.ControlPlaneComponent], reason, msg string, keepAvailable bool) (rollout.Summary, error) {
	version := in.Version
	var next api.ControlPlaneComponent
	if old != nil {
		if err := deepCopy(old.Value, &next); err != nil {
			return rollout.Summary{}, err
		}
	} else {
		next = api.ControlPlaneComponent{ObjectMeta: api.ObjectMeta{Name: comp.Name}, Cluster: cluster,
			Spec: api.ControlPlaneComponentSpec{Version: version, Replicas: comp.Replicas(in.Policy), DependsOn: comp.DependsOn}}
	}
	now := time.Now().UTC()
	set := func(t string, msg string) {
		next.Status.Conditions.Set(api.Condition{Type: t, Status: api.ConditionFalse, Reason: reason,
			Message: msg, ObservedGeneration: next.Generation}, now)
	}
	available := keepAvailable && next.Status.Conditions.IsTrue(api.ConditionAvailable)
	if !available {
		set(api.ConditionAvailable, msg)
	}
	set(api.ConditionRolloutComplete, msg)
	d.observeMetrics(cluster, comp.Name, old, &next, now)
	return rollout.Summary{Available: available, Ready: next.Status.ReadyReplicas},
		d.save(ctx, log, cluster, old, &next, "release", version, "reason", reason)
}

// save stores next when it differs from old and publishes an event when its Available,
// RolloutComplete or Degraded condition or a draining mark changed; logArgs go on that log line.
func (d *Daemon) save(ctx context.Context, log *slog.Logger, cluster string,
	old *store.Entry[api.ControlPlaneComponent], next *api.ControlPlaneComponent, logArgs ...any) error {
	if old != nil && jsonEqual(old.Value, *next) {
		return nil
	}
	key := api.ComponentKey(cluster, next.Name)
	verb := eventVerb(old, next)
	if verb == "" && drainingChanged(old, next) {
		verb = VerbProgressing // infrad's load balancer follows the draining marks
	}
	var sent outbox.Entry
	var err error
	if verb != "" {
		// The event goes to the outbox before the write it is about, and out after it
		// (pkg/outbox).
		if sent, err = d.rt.Outbox.Record(ctx, cluster, events.ResourceComponent, verb, cluster+"/"+next.Name, next); err != nil {
			return err
		}
	}
	if old == nil {
		_, err = d.components.Create(ctx, key, next)
	} else {
		_, err = d.components.Update(ctx, key, next, old.Revision)
	}
	if err != nil {
		return err
	}
	d.rt.Outbox.Send(ctx, sent)
	if verb != "" {
		log.Info("component "+verb, logArgs...)
	}
	return nil
}

// drainingChanged reports whether a replica's draining mark changed.
func drainingChanged(old *store.Entry[api.ControlPlaneComponent], next *api.ControlPlaneComponent) bool {
	marks := func(rs []api.ReplicaStatus) string {
		var b strings.Builder
		for _, r := range rs {
			if r.Draining {
				b.WriteString(r.Name + ",")
			}
		}
		return b.String()
	}
	var was []api.ReplicaStatus
	if old != nil {
		was = old.Value.Status.Replicas
	}
	return marks(was) != marks(next.Status.Replicas)
}

// eventVerb is the event to publish for a status change, or "" when the Available,
// RolloutComplete and Degraded conditions kept their status.
func eventVerb(old *store.Entry[api.ControlPlaneComponent], next *api.ControlPlaneComponent) string {
	status := func(cs api.Conditions, t string) api.ConditionStatus {
		c, ok := cs.Get(t)
		if !ok {
			return api.ConditionUnknown
		}
		return c.Status
	}
	var was api.Conditions
	if old != nil {
		was = old.Value.Status.Conditions
	}
	is := next.Status.Conditions
	changed := false
	for _, t := range []string{api.ConditionAvailable, api.ConditionRolloutComplete, api.ConditionDegraded} {
		if status(was, t) != status(is, t) {
			changed = true
		}
	}
	switch {
	case !changed:
		return ""
	case is.IsTrue(api.ConditionDegraded),
		// Lost outside a rollout: a replica failed. Within one, a replica being replaced
		// is expected (a single replica takes the component down for a moment).
		was.IsTrue(api.ConditionAvailable) && !is.IsTrue(api.ConditionAvailable) &&
			was.IsTrue(api.ConditionRolloutComplete) && old.Value.Spec.ConfigHash == next.Spec.ConfigHash:
		return VerbDegraded
	case is.IsTrue(api.ConditionAvailable) && is.IsTrue(api.ConditionRolloutComplete):
		return VerbAvailable
	default:
		return VerbProgressing
	}
}

// recordHibernated records every component of c hibernated (no replica, Available False,
// RolloutComplete True, reason Hibernated), whatever the runtime: call it once nothing of
// the control plane runs any more.
func (d *Daemon) recordHibernated(ctx context.Context, log *slog.Logger, c *api.Cluster) error {
	byName, err := d.records(ctx, c.Name)
	if err != nil {
		return err
	}
	for _, comp := range component.All() {
		old := byName[comp.Name]
		if old == nil && comp.Name == api.ComponentKarpenter {
			continue // never ran
		}
		var next api.ControlPlaneComponent
		if old != nil {
			if err := deepCopy(old.Value, &next); err != nil {
				return err
			}
		} else {
			// A cluster created hibernated: nothing ran yet, nothing is missing.
			next = api.ControlPlaneComponent{ObjectMeta: api.ObjectMeta{Name: comp.Name}, Cluster: c.Name,
				Spec:   api.ControlPlaneComponentSpec{Version: c.Spec.Release.Version, DependsOn: comp.DependsOn},
				Status: api.ControlPlaneComponentStatus{Version: c.Spec.Release.Version}}
		}
		now := time.Now().UTC()
		st := &next.Status
		st.ReadyReplicas, st.Replicas = 0, nil
		const msg = "the cluster hibernates: no replica runs"
		for _, t := range []struct {
			typ    string
			status api.ConditionStatus
			reason string
		}{
			{api.ConditionAvailable, api.ConditionFalse, api.ReasonHibernated},
			{api.ConditionRolloutComplete, api.ConditionTrue, api.ReasonHibernated},
			{api.ConditionDegraded, api.ConditionFalse, api.ReasonHibernated},
		} {
			st.Conditions.Set(api.Condition{Type: t.typ, Status: t.status, Reason: t.reason, Message: msg, ObservedGeneration: next.Generation}, now)
		}
		d.metrics.observeReplicas(c.Name, comp.Name, 0, 0, 0)
		d.observeMetrics(c.Name, comp.Name, old, &next, now)
		if err := d.save(ctx, log.With("component", comp.Name), c.Name, old, &next, "hibernated", true); err != nil {
			return fmt.Errorf("%s: %w", comp.Name, err)
		}
	}
	return nil
}

// forget deletes the controlplane keys of a cluster whose workloads are gone, publishing
// component.deleted for each, and drops its metrics. It is idempotent.
func (d *Daemon) forget(ctx context.Context, log *slog.Logger, cluster string) error {
	keys, err := d.components.Keys(ctx, api.ClusterPartsFilter(cluster))
	if err != nil {
		return err
	}
	for _, k := range keys {
		comp := strings.TrimPrefix(k, cluster+".")
		sent, err := d.rt.Outbox.Record(ctx, cluster, events.ResourceComponent, VerbDeleted, cluster+"/"+comp, nil)
		if err != nil {
			return err
		}
		if err := d.components.Delete(ctx, k, 0); err != nil {
			return err
		}
		d.rt.Outbox.Send(ctx, sent)
	}
	d.metrics.forget(cluster)
	if len(keys) > 0 {
		log.Info("control plane removed", "keys", len(keys))
	}
	return nil
}

// observeMetrics updates the availability gauge and, when a rollout just completed, the
// rollout duration (from the RolloutComplete condition's turn to False).
func (d *Daemon) observeMetrics(cluster, comp string, old *store.Entry[api.ControlPlaneComponent], next *api.ControlPlaneComponent, now time.Time) {
	avail := 0.0
	if next.Status.Conditions.IsTrue(api.ConditionAvailable) {
		avail = 1
	}
	d.metrics.available.WithLabelValues(cluster, comp).Set(avail)
	if old == nil || !next.Status.Conditions.IsTrue(api.ConditionRolloutComplete) {
		return
	}
	if was, ok := old.Value.Status.Conditions.Get(api.ConditionRolloutComplete); ok && was.Status != api.ConditionTrue {
		d.metrics.rollout.WithLabelValues(comp).Observe(now.Sub(was.LastTransitionTime).Seconds())
	}
}

func deepCopy[T any](in *T, out *T) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

func jsonEqual(a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}
