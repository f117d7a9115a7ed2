package nodepoold

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/outbox"
	"github.com/hostplane/hostplane/pkg/store"
)

// Condition reasons.
const (
	ReasonAsExpected             = "AsExpected"
	ReasonNoManagementCluster    = "NoManagementCluster"
	ReasonWaitingForManagement   = "WaitingForManagementCluster"
	ReasonWaitingForUserData     = "WaitingForUserData"
	ReasonReconcileError         = "ReconcileError"
	ReasonWaitingForMachines     = "WaitingForMachines"
	ReasonInvalidRelease         = "InvalidRelease"
	ReasonInvalidConfig          = "InvalidConfig"
	ReasonUpdating               = "Updating"
	ReasonMachinesNotReady       = "MachinesNotReady"
	ReasonNodesNotHealthy        = "NodesNotHealthy"
	ReasonNodesNotJoined         = "NodesNotJoined"
	ReasonGuestClusterUnreadable = "GuestClusterUnreadable"
	ReasonDisabled               = "Disabled"
)

// maxListed bounds the machines a condition message names.
const maxListed = 5

// writeStatus stores the status computed from s (unless the spec moved on meanwhile: the
// reconcile its change queued reports then) and publishes nodepool.status when it changed.
func (d *Daemon) writeStatus(ctx context.Context, s *scope) (bool, error) {
	key := api.NodePoolKey(s.np.Cluster, s.np.Name)
	var before api.NodePoolStatus
	var sent, scaled outbox.Entry
	updated, _, err := d.pools.MutateBefore(ctx, key, false, func(np *api.NodePool) error {
		if np.Generation != s.np.Generation || np.DeletionTimestamp != nil {
			return store.ErrNoChange
		}
		before = np.Status
		before.Conditions = slices.Clone(np.Status.Conditions)
		d.computeStatus(&np.Status, s)
		return nil
	}, func(ctx context.Context, np *api.NodePool) error {
		if !statusChanged(&before, &np.Status) {
			return nil
		}
		var err error
		if sent, err = d.record(ctx, s.np.Cluster, s.np.Name, VerbStatus); err != nil {
			return err
		}
		if lastScale(&before) != lastScale(&np.Status) {
			scaled, err = d.record(ctx, s.np.Cluster, s.np.Name, VerbScaled)
		}
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("write status: %w", err)
	}
	d.metrics.observe(updated)
	if !statusChanged(&before, &updated.Status) {
		return false, nil
	}
	d.logStatus(ctx, s, updated)
	d.outbox.Send(ctx, sent)
	if ev := lastScale(&updated.Status); ev != lastScale(&before) {
		d.outbox.Send(ctx, scaled)
		d.metrics.scale(s.np.Cluster, s.np.Name, ev)
	}
	return true, nil
}

// lastScale is the autoscaler's last scale of a pool (the zero event: none).
func lastScale(st *api.NodePoolStatus) api.ScaleEvent {
	if st.Autoscaling == nil || st.Autoscaling.LastScale == nil {
		return api.ScaleEvent{}
	}
	return *st.Autoscaling.LastScale
}

// statusChanged reports a change a reader of nodepool.status cares about (not a timestamp).
func statusChanged(a, b *api.NodePoolStatus) bool {
	if a.Replicas != b.Replicas || a.ReadyReplicas != b.ReadyReplicas || a.UpdatedReplicas != b.UpdatedReplicas ||
		a.Version != b.Version || a.ObservedGeneration != b.ObservedGeneration || len(a.Conditions) != len(b.Conditions) ||
		!sameAutoscaling(a, b) {
		return true
	}
	for _, c := range b.Conditions {
		old, ok := a.Conditions.Get(c.Type)
		if !ok || old.Status != c.Status || old.Reason != c.Reason || old.Message != c.Message {
			return true
		}
	}
	return false
}

// sameAutoscaling reports whether two pools' status.autoscaling say the same.
func sameAutoscaling(a, b *api.NodePoolStatus) bool {
	if (a.Autoscaling == nil) != (b.Autoscaling == nil) {
		return false
	}
	return a.Autoscaling == nil || (a.Autoscaling.TargetReplicas == b.Autoscaling.TargetReplicas && lastScale(a) == lastScale(b))
}

// computeStatus is the one place a pool's status is derived from what a reconcile saw and did.
func (d *Daemon) computeStatus(st *api.NodePoolStatus, s *scope) {
	np := s.np
	gen := np.Generation
	set := func(t string, status api.ConditionStatus, reason, msg string) {
		st.Conditions.Set(api.Condition{Type: t, Status: status, Reason: reason, Message: msg, ObservedGeneration: gen}, s.now)
	}
	st.ConfigHash = s.hash
	if len(s.errs) == 0 {
		st.ObservedGeneration = gen
	}
	counts := s.counts()
	if counts.known {
		st.Replicas, st.ReadyReplicas, st.UpdatedReplicas = counts.replicas, counts.ready, counts.updated
		if counts.version != "" {
			st.Version = counts.version
		}
	}

	// What the spec asks for.
	if err := d.checkRelease(np, s.cluster); err != nil {
		set(api.NodePoolConditionValidReleaseImage, api.ConditionFalse, ReasonInvalidRelease, err.Error())
	} else {
		set(api.NodePoolConditionValidReleaseImage, api.ConditionTrue, ReasonAsExpected, "release "+np.Spec.Release.Version)
	}
	if msg := d.checkConfig(np); msg != "" {
		set(api.NodePoolConditionValidMachineConfig, api.ConditionFalse, ReasonInvalidConfig, msg)
	} else {
		set(api.NodePoolConditionValidMachineConfig, api.ConditionTrue, ReasonAsExpected, fmt.Sprintf("%d config documents, config %s", len(np.Spec.Config), short(s.hash)))
	}
	st.Autoscaling = s.autoscalingStatus()
	if a := np.Spec.AutoScaling; a != nil {
		set(api.NodePoolConditionAutoscalingEnabled, api.ConditionTrue, ReasonAsExpected, fmt.Sprintf("between %d and %d machines", a.Min, a.Max))
	} else {
		set(api.NodePoolConditionAutoscalingEnabled, api.ConditionFalse, ReasonDisabled, fmt.Sprintf("a fixed size of %d machines", np.Spec.DesiredReplicas()))
	}
	switch {
	case !np.Spec.Management.AutoRepair:
		set(api.NodePoolConditionAutorepairEnabled, api.ConditionFalse, ReasonDisabled, "autoRepair is off")
	case !api.ProvidesMachines(np.Spec.Platform.Type):
		set(api.NodePoolConditionAutorepairEnabled, api.ConditionFalse, ReasonDisabled, "platform none: the user provisions and repairs the machines")
	default:
		set(api.NodePoolConditionAutorepairEnabled, api.ConditionTrue, ReasonAsExpected, "MachineHealthCheck "+np.Name)
	}

	// What runs.
	d.machineConditions(s, set)
	switch {
	case counts.versionsBehind > 0:
		set(api.NodePoolConditionUpdatingVersion, api.ConditionTrue, ReasonUpdating,
			fmt.Sprintf("%d of %d machines run %s", counts.replicas-counts.versionsBehind, counts.replicas, np.Spec.Release.Version))
	default:
		set(api.NodePoolConditionUpdatingVersion, api.ConditionFalse, ReasonAsExpected, "")
	}
	switch {
	case counts.known && counts.updated < counts.replicas:
		msg := fmt.Sprintf("%d of %d machines run config %s", counts.updated, counts.replicas, short(s.hash))
		if len(s.inPlace.waiting) > 0 {
			msg += "; " + listFirst(s.inPlace.waiting, maxListed)
		}
		set(api.NodePoolConditionUpdatingConfig, api.ConditionTrue, ReasonUpdating, msg)
	case !s.userDataReady && counts.replicas > 0:
		set(api.NodePoolConditionUpdatingConfig, api.ConditionTrue, ReasonWaitingForUserData, s.userDataMessage())
	default:
		set(api.NodePoolConditionUpdatingConfig, api.ConditionFalse, ReasonAsExpected, "")
	}

	// Ready last: it sums up the others.
	switch {
	case s.management != "" && !s.mgmtPending():
		set(api.NodePoolConditionReady, api.ConditionFalse, ReasonNoManagementCluster, s.management)
	case s.management != "":
		set(api.NodePoolConditionReady, api.ConditionFalse, ReasonWaitingForManagement, s.management)
	case len(s.errs) > 0:
		set(api.NodePoolConditionReady, api.ConditionFalse, ReasonReconcileError, s.errs[0].Error())
	case s.template == nil:
		set(api.NodePoolConditionReady, api.ConditionFalse, ReasonWaitingForUserData, s.userDataMessage())
	case counts.ready < s.desired || counts.replicas != s.desired:
		set(api.NodePoolConditionReady, api.ConditionFalse, ReasonWaitingForMachines,
			fmt.Sprintf("%d of %d machines have a Ready node (%d machines exist)", counts.ready, s.desired, counts.replicas))
	default:
		set(api.NodePoolConditionReady, api.ConditionTrue, ReasonAsExpected, fmt.Sprintf("%d of %d machines have a Ready node", counts.ready, s.desired))
	}
}

// poolCounts are the pool's machine counts and version.
type poolCounts struct {
	known                    bool // the machines could be read
	replicas, ready, updated int32
	versionsBehind           int32
	version                  string // the release every machine runs ("" unless they all run one)
}

func (s *scope) counts() poolCounts {
	st := s.state
	if st == nil {
		return poolCounts{}
	}
	c := poolCounts{known: true}
	var versions []string // what each machine runs, or (no Node yet) will run
	var running []string  // what each machine's Node reports ("" for none yet)
	want := "v" + s.np.Spec.Release.Version
	if !api.ProvidesMachines(s.np.Spec.Platform.Type) {
		for _, n := range poolNodes(s) {
			c.replicas++
			if nodeConditionStatus(n, corev1.NodeReady) == corev1.ConditionTrue {
				c.ready++
			}
			if api.RunsConfig(n.Labels, n.Annotations, s.hash) {
				c.updated++
			}
			versions = append(versions, n.Status.NodeInfo.KubeletVersion)
			running = append(running, n.Status.NodeInfo.KubeletVersion)
		}
	} else {
		live := st.liveMachines()
		for i := range live {
			m := &live[i]
			c.replicas++
			if st.nodeReady(m) {
				c.ready++
			}
			if st.updated(m, s) {
				c.updated++
			}
			versions = append(versions, machineVersion(st, m))
			running = append(running, nodeVersion(st, m))
		}
	}
	for _, v := range versions {
		if v != want {
			c.versionsBehind++
		}
	}
	if len(running) > 0 && !slices.Contains(running, "") && len(slices.Compact(slices.Sorted(slices.Values(running)))) == 1 {
		c.version = strings.TrimPrefix(running[0], "v")
	}
	return c
}

// machineVersion is the kubelet version of a Machine's Node, or (no Node yet) the version it
// was created with.
func machineVersion(st *poolState, m *clusterv1.Machine) string {
	if v := nodeVersion(st, m); v != "" || m.Status.NodeRef.Name != "" {
		return v
	}
	return m.Spec.Version
}

// nodeVersion is the kubelet version a Machine's Node reports: from the guest cluster, else
// as Cluster API last saw it ("" before it has a Node).
func nodeVersion(st *poolState, m *clusterv1.Machine) string {
	if n := st.node(m); n != nil && n.Status.NodeInfo.KubeletVersion != "" {
		return n.Status.NodeInfo.KubeletVersion
	}
	if m.Status.NodeRef.Name != "" && m.Status.NodeInfo != nil {
		return m.Status.NodeInfo.KubeletVersion
	}
	return ""
}

// machineConditions sets AllMachinesReady, AllNodesHealthy and ReachedIgnitionEndpoint, which
// name the machines that are stuck and why.
func (d *Daemon) machineConditions(s *scope, set func(t string, status api.ConditionStatus, reason, msg string)) {
	st := s.state
	if st == nil || !api.ProvidesMachines(s.np.Spec.Platform.Type) {
		msg := "no machines are managed"
		if s.management != "" {
			msg = s.management
		}
		for _, t := range []string{api.NodePoolConditionAllMachinesReady, api.NodePoolConditionAllNodesHealthy, api.NodePoolConditionReachedIgnitionEndpoint} {
			set(t, api.ConditionUnknown, ReasonAsExpected, msg)
		}
		return
	}
	var notReady, unhealthy, notJoined []string
	live := st.liveMachines()
	for i := range live {
		m := &live[i]
		if c := meta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineReadyCondition); c == nil || c.Status != "True" {
			why := "not reported yet"
			if c != nil {
				why = strings.TrimSpace(c.Reason + ": " + firstLine(c.Message))
			}
			notReady = append(notReady, fmt.Sprintf("machine %s (%s): %s", m.Name, m.Status.Phase, why))
		}
		age := s.now.Sub(m.CreationTimestamp.Time).Round(time.Second)
		n := st.node(m)
		switch {
		case m.Status.NodeRef.Name == "" || (st.nodes != nil && n == nil):
			if age < d.cfg.JoinGrace {
				continue
			}
			msg := fmt.Sprintf("machine %s: no node after %s", m.Name, age)
			if r, ok := st.infra[m.Spec.InfrastructureRef.Name]; ok && !r.ready && (r.message != "" || r.reason != "") {
				msg += "; the machine reports: " + strings.TrimPrefix(r.reason+": "+firstLine(r.message), ": ")
			}
			notJoined = append(notJoined, msg)
			unhealthy = append(unhealthy, fmt.Sprintf("machine %s: no node", m.Name))
		case n != nil:
			if status := nodeConditionStatus(n, corev1.NodeReady); status != corev1.ConditionTrue {
				unhealthy = append(unhealthy, fmt.Sprintf("machine %s: node %s is not Ready (%s)", m.Name, n.Name, nodeReadyDetail(n)))
			}
		case !st.nodeReady(m):
			unhealthy = append(unhealthy, fmt.Sprintf("machine %s: node %s is not Ready", m.Name, m.Status.NodeRef.Name))
		}
	}
	conditionFromList(set, api.NodePoolConditionAllMachinesReady, ReasonMachinesNotReady, notReady, fmt.Sprintf("%d machines ready", len(live)))
	healthyMsg := fmt.Sprintf("%d nodes Ready", len(live))
	if st.guestErr != nil {
		healthyMsg += " (from Cluster API: the guest cluster is unreadable: " + st.guestErr.Error() + ")"
	}
	conditionFromList(set, api.NodePoolConditionAllNodesHealthy, ReasonNodesNotHealthy, unhealthy, healthyMsg)
	conditionFromList(set, api.NodePoolConditionReachedIgnitionEndpoint, ReasonNodesNotJoined, notJoined, "every machine older than "+d.cfg.JoinGrace.String()+" has joined")
}

func conditionFromList(set func(string, api.ConditionStatus, string, string), t, reason string, items []string, okMsg string) {
	if len(items) == 0 {
		set(t, api.ConditionTrue, ReasonAsExpected, okMsg)
		return
	}
	slices.Sort(items)
	set(t, api.ConditionFalse, reason, listFirst(items, maxListed))
}

// nodeReadyDetail is a Node's Ready condition as "Status Reason: message".
func nodeReadyDetail(n *corev1.Node) string {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return strings.TrimSpace(fmt.Sprintf("%s %s: %s", c.Status, c.Reason, firstLine(c.Message)))
		}
	}
	return "no Ready condition yet"
}

// userDataMessage says what the pool waits for from ignitiond.
func (s *scope) userDataMessage() string {
	msg := "waiting for ignitiond's userdata of config " + short(s.hash)
	switch {
	case s.ignition == nil:
		msg += " (no token record yet)"
	case s.ignition.Message != "":
		msg += ": " + s.ignition.Message
	case s.ignition.Current.ConfigHash != s.hash:
		msg += " (its token serves config " + short(s.ignition.Current.ConfigHash) + ")"
	}
	return msg
}

// checkRelease re-checks the pool's release against the catalogue and the cluster's current
// release (which may have moved since the pool was stored).
func (d *Daemon) checkRelease(np *api.NodePool, c *api.Cluster) error {
	if err := releases.Known(np.Spec.Release.Version); err != nil {
		return err
	}
	if c == nil {
		return nil
	}
	return api.CheckNodePoolRelease(c.Spec.Release.Version, np.Spec.Release.Version)
}

// checkConfig re-checks the config documents; it returns what is wrong ("" when nothing).
func (d *Daemon) checkConfig(np *api.NodePool) string {
	var bad []string
	for _, doc := range np.Spec.Config {
		if err := d.cfg.CheckConfig(doc); err != nil {
			bad = append(bad, err.Error())
		}
	}
	return listFirst(bad, maxListed)
}

// logStatus logs a status change with what a reader needs.
func (d *Daemon) logStatus(ctx context.Context, s *scope, np *api.NodePool) {
	attrs := []any{"generation", np.Generation, "replicas", np.Status.Replicas, "ready", np.Status.ReadyReplicas,
		"updated", np.Status.UpdatedReplicas, "version", np.Status.Version}
	if c, ok := np.Status.Conditions.Get(api.NodePoolConditionReady); ok {
		attrs = append(attrs, "ready_condition", string(c.Status)+" "+c.Reason+": "+c.Message)
	}
	s.log.InfoContext(ctx, "node pool status changed", attrs...)
}

// listFirst joins up to n items with "; " and says how many more there are.
func listFirst(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, "; ")
	}
	return strings.Join(items[:n], "; ") + fmt.Sprintf("; and %d more", len(items)-n)
}

// oneLine puts a multi-line message (Cluster API's condition messages are bullet lists) on
// one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

// autoscalingStatus is the autoscaler's view of an autoscaled pool: the replicas of its
// MachineDeployment (or MachineSet) and the last scale the autoscaler recorded there. Nil for
// a fixed-size pool, or before the object was read.
func (s *scope) autoscalingStatus() *api.NodePoolAutoscalingStatus {
	if s.np.Spec.AutoScaling == nil || s.state == nil {
		return nil
	}
	var (
		replicas *int32
		ann      map[string]string
	)
	switch {
	case s.state.md != nil:
		replicas, ann = s.state.md.Spec.Replicas, s.state.md.Annotations
	case s.state.ms != nil:
		replicas, ann = s.state.ms.Spec.Replicas, s.state.ms.Annotations
	default:
		return nil
	}
	out := &api.NodePoolAutoscalingStatus{}
	if replicas != nil {
		out.TargetReplicas = *replicas
	}
	var ev api.ScaleEvent
	if raw := ann[api.AnnotationLastScale]; raw != "" && json.Unmarshal([]byte(raw), &ev) == nil {
		out.LastScale = &ev
	}
	return out
}
