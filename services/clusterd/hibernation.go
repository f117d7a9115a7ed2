package clusterd

import (
	"context"
	"fmt"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/hostplane/hostplane/pkg/api"
)

// Hibernation (docs/hibernation.md): spec.hibernation.enabled is the one lever. Users pull
// it (PATCH, the CLI, the cluster.hibernate inbound event); clusterd pulls it at a
// schedule's start and end, after spec.hibernation.idleAfter without a new connection, and
// when infrad saw a connection reach the endpoint of the sleeping cluster. componentd and
// infrad follow it; status.hibernation says why it last moved, and the Hibernated condition
// whether nothing of the cluster runs any more.

// DefaultHibernationTick is how often clusterd looks at the schedules and idleness of every
// cluster that has some (cron schedules have minute resolution).
const DefaultHibernationTick = 10 * time.Second

// Reasons of the Hibernated condition while it is False.
const (
	ReasonAwake       = "Awake"
	ReasonHibernating = "Hibernating" // asked to; something of the cluster still runs
	ReasonResuming    = "Resuming"    // asked to wake; some component still hibernates
)

// noteHibernation records in c's status why and when spec.hibernation.enabled changed.
func noteHibernation(c *api.Cluster, reason string, now time.Time) {
	h := api.HibernationStatus{}
	if c.Status.Hibernation != nil {
		h = *c.Status.Hibernation
	}
	t := now.UTC()
	h.Reason, h.ChangedTime = reason, &t
	c.Status.Hibernation = &h
}

// setHibernated sets Hibernated: True once the spec asks for hibernation and every
// component reports it stopped for it, with the reason it was asked to.
func (s *statusScope) setHibernated() {
	want := s.c.Spec.Hibernating()
	hibernated, running := 0, 0
	for _, name := range components {
		comp := s.o.components[name]
		if comp == nil {
			continue
		}
		if cond, ok := comp.Status.Conditions.Get(api.ConditionAvailable); ok && cond.Reason == api.ReasonHibernated {
			hibernated++
		} else {
			running++
		}
	}
	reason := api.HibernationReasonRequested
	if h := s.st.Hibernation; h != nil && h.Reason != "" {
		reason = h.Reason
	}
	machinesOff := s.o.infra == nil || s.o.infra.Hibernated
	switch {
	case want && running == 0 && hibernated > 0 && machinesOff:
		s.set(api.ConditionHibernated, api.ConditionTrue, reason,
			"no control-plane process and no machine of the cluster runs; its data, certificates and endpoint are kept")
	case want && s.c.Spec.Hibernation != nil && s.o.notSupported != "":
		s.set(api.ConditionHibernated, api.ConditionFalse, ReasonNotSupported, s.o.notSupported)
	case want:
		msg := fmt.Sprintf("stopping the control plane (%s): %d of %d components stopped", reason, hibernated, hibernated+running)
		if !machinesOff {
			msg += "; waiting for infrad to stop the machines"
		}
		s.set(api.ConditionHibernated, api.ConditionFalse, ReasonHibernating, msg)
	case hibernated > 0:
		s.set(api.ConditionHibernated, api.ConditionFalse, ReasonResuming,
			fmt.Sprintf("waking (%s): %d components still to start", reason, hibernated))
	default:
		s.set(api.ConditionHibernated, api.ConditionFalse, ReasonAwake, "the cluster is not hibernated")
	}
}

// ReasonNotSupported: the runtime cannot hibernate the cluster.
const ReasonNotSupported = "NotSupported"

// hibernationTrigger is what the schedules ask of a cluster now.
type hibernationTrigger struct {
	due       bool   // a change of spec.hibernation.enabled is due
	hibernate bool   // to this value
	reason    string // api.HibernationReasonSchedule or api.HibernationReasonIdle
}

// scheduleTrigger returns the latest schedule start or end of c in (after, now]: the one
// that decides whether the cluster hibernates now. Unparseable schedules (validation
// refuses them) are ignored.
func scheduleTrigger(scheds []api.HibernationSchedule, after, now time.Time) hibernationTrigger {
	var (
		latest time.Time
		out    hibernationTrigger
	)
	for _, s := range scheds {
		loc := time.UTC
		if s.Location != "" {
			l, err := time.LoadLocation(s.Location)
			if err != nil {
				continue
			}
			loc = l
		}
		for _, e := range []struct {
			expr      string
			hibernate bool
		}{{s.Start, true}, {s.End, false}} {
			if e.expr == "" {
				continue
			}
			sched, err := cron.ParseStandard(e.expr)
			if err != nil {
				continue
			}
			if t := lastFiring(sched, after.In(loc), now); !t.IsZero() && t.After(latest) {
				latest = t
				out = hibernationTrigger{due: true, hibernate: e.hibernate, reason: api.HibernationReasonSchedule}
			}
		}
	}
	return out
}

// maxFirings bounds the walk through a schedule's firings since the last look (a month of
// minutes, for a cluster whose clusterd was down that long).
const maxFirings = 50000

// lastFiring returns the last time sched fires in (after, now], or the zero time.
func lastFiring(sched cron.Schedule, after, now time.Time) time.Time {
	var last time.Time
	t := after
	for range maxFirings {
		n := sched.Next(t)
		if n.IsZero() || n.After(now) {
			break
		}
		last, t = n, n
	}
	return last
}

// applyHibernationTriggers moves spec.hibernation.enabled of live cluster c when a schedule
// fired since the last look (status.hibernation.scheduleTime), or to false when infrad saw a
// connection reach the endpoint while it hibernates (infra.wakeRequested), or to true when
// the endpoint saw no new connection for spec.hibernation.idleAfter (infra.lastActivity). It returns the time up to which the schedules are applied
// (to record in the status), or nil when that time need not move.
func (d *Daemon) applyHibernationTriggers(ctx context.Context, c *api.Cluster, inf *api.Infra) (*time.Time, error) {
	h := c.Spec.Hibernation
	if h == nil {
		return nil, nil
	}
	if inf != nil && inf.WakeRequested != nil && c.Spec.Hibernating() {
		// A connection reached the endpoint after the cluster was put to sleep (infrad's
		// load balancer holds it until kube-apiserver is ready; it only asks once the
		// cluster is fully asleep, so not before the change: equal times are a clock that
		// did not move, as a test's fake one).
		if st := c.Status.Hibernation; st == nil || st.ChangedTime == nil || !inf.WakeRequested.Before(*st.ChangedTime) {
			d.clusterLog(c.Name).InfoContext(ctx, "waking: a connection reached the endpoint", "at", inf.WakeRequested)
			_, err := d.setHibernation(ctx, c.Name, false, api.HibernationReasonConnection)
			return nil, err
		}
	}
	now := d.cfg.Clock.Now().UTC()
	var trig hibernationTrigger
	// Idle since the endpoint's last new connection, the last change of
	// spec.hibernation.enabled or the creation, whichever is latest.
	lastActivity := c.CreationTimestamp
	if inf != nil && inf.LastActivity != nil && inf.LastActivity.After(lastActivity) {
		lastActivity = *inf.LastActivity
	}
	if st := c.Status.Hibernation; st != nil && st.ChangedTime != nil && st.ChangedTime.After(lastActivity) {
		lastActivity = *st.ChangedTime
	}
	var applied *time.Time
	if len(h.Schedules) > 0 {
		// The first look only notes the time: a start or end before it does not count. Later
		// looks move it on only when something fired, so the status is written only then.
		st := c.Status.Hibernation
		if st == nil || st.ScheduleTime == nil {
			applied = &now
		} else if trig = scheduleTrigger(h.Schedules, *st.ScheduleTime, now); trig.due {
			applied = &now
		}
	}
	if idle := c.Spec.IdleAfter(); !trig.due && idle > 0 && !c.Spec.Hibernating() && inf != nil && measuresActivity(inf) && now.Sub(lastActivity) >= idle {
		trig = hibernationTrigger{due: true, hibernate: true, reason: api.HibernationReasonIdle}
	}
	if !trig.due || trig.hibernate == c.Spec.Hibernating() {
		return applied, nil
	}
	d.clusterLog(c.Name).InfoContext(ctx, "hibernation trigger", "hibernate", trig.hibernate, "reason", trig.reason)
	_, err := d.setHibernation(ctx, c.Name, trig.hibernate, trig.reason)
	return applied, err
}

// setHibernation sets spec.hibernation.enabled, as PATCH does, recording reason.
func (d *Daemon) setHibernation(ctx context.Context, name string, enabled bool, reason string) (*api.Cluster, error) {
	return d.updateSpec(ctx, name, reason, func(spec api.ClusterSpec) (api.ClusterSpec, error) {
		h := api.Hibernation{}
		if spec.Hibernation != nil {
			h = *spec.Hibernation
		}
		h.Enabled = &enabled
		spec.Hibernation = &h
		return spec, nil
	})
}

// hibernationTicker enqueues, every tick of the daemon's clock, the clusters whose
// schedules or idleness may move spec.hibernation.enabled.
func (d *Daemon) hibernationTicker(ctx context.Context) {
	entries, err := d.clusters.List(ctx)
	if err != nil {
		d.Logger().WarnContext(ctx, "hibernation: list clusters", "err", err)
		return
	}
	for _, e := range entries {
		if h := e.Value.Spec.Hibernation; h != nil && (len(h.Schedules) > 0 || h.IdleAfter != "") {
			d.controller.EnqueueContext(ctx, e.Key)
		}
	}
}

// measuresActivity reports whether the cluster's endpoint is an infrad load balancer the
// daemons do not go through, the one that sees (and wakes on) users' connections: in front
// of a single apiserver, or of several with an internal listener for the daemons
// (infra.internalEndpoint). A SingleReplica record from before keeps the apiserver's own
// port, where nobody counts connections, and an HA record without the internal listener has
// the daemons' connections on its endpoint, so idleAfter does nothing there.
func measuresActivity(inf *api.Infra) bool {
	if len(inf.APIServers) == 1 {
		return inf.Endpoint != inf.APIServers[0]
	}
	return len(inf.APIServers) > 1 && inf.InternalEndpoint != nil && inf.InternalEndpoint.Port != 0
}
