package api

import (
	"strconv"
	"time"
	_ "time/tzdata" // schedules name IANA time zones; images built FROM scratch have no zoneinfo
)

// Hibernation is spec.hibernation (Gardener's shape): a hibernated cluster keeps its etcd
// data, certificates, tokens and ports, and runs no control-plane process and no machine
// (docs/hibernation.md).
type Hibernation struct {
	// Enabled asks for the cluster to hibernate (true) or run (false or absent). clusterd
	// also sets it when a schedule fires, and to false when a connection to the endpoint of
	// the hibernated cluster wakes it.
	Enabled *bool `json:"enabled,omitempty"`
	// Schedules hibernate the cluster at each Start and wake it at each End.
	Schedules []HibernationSchedule `json:"schedules,omitempty"`
	// IdleAfter hibernates the cluster once its endpoint has seen no new connection for
	// that long (a Go duration such as "30m"); absent: never for idleness.
	IdleAfter string `json:"idleAfter,omitempty"`
}

// HibernationSchedule is one schedule: cron expressions (five fields, in Location's time
// zone) at which the cluster hibernates (Start) and wakes (End). One of them may be absent.
type HibernationSchedule struct {
	Start    string `json:"start,omitempty"`
	End      string `json:"end,omitempty"`
	Location string `json:"location,omitempty"` // an IANA time zone; absent: UTC
}

// Why spec.hibernation.enabled last changed (status.hibernation.reason; the Hibernated
// condition's reason once the cluster hibernates).
const (
	HibernationReasonRequested = "Requested" // the API, the CLI or the cluster.hibernate inbound event
	HibernationReasonSchedule  = "Schedule"  // a schedule's start or end
	HibernationReasonIdle      = "Idle"      // no new connection for spec.hibernation.idleAfter
	// HibernationReasonConnection: a connection to the endpoint of the hibernated cluster
	// woke it.
	HibernationReasonConnection = "Connection"
)

// ConditionHibernated is the HostedCluster condition that says whether the cluster
// hibernates: True once nothing of it runs, with the reason it was asked to.
const ConditionHibernated = "Hibernated"

// ReasonHibernated is the reason of a component's (and the cluster's Available) condition
// while the cluster hibernates.
const ReasonHibernated = "Hibernated"

// ReasonHibernationNotSupported is the reason of a component's Degraded condition when its
// runtime cannot hibernate it. No componentd writes it any more (the kubernetes runtime
// hibernates since issue 16); clusterd still reads it, as records written before may say it.
const ReasonHibernationNotSupported = "HibernationNotSupported"

// HibernationStatus is status.hibernation: why and when spec.hibernation.enabled last
// changed, and how far clusterd applied the schedules.
type HibernationStatus struct {
	Reason      string     `json:"reason,omitempty"`
	ChangedTime *time.Time `json:"changedTime,omitempty"`
	// ScheduleTime is the time up to which the schedules were applied: a schedule's start or
	// end after it is still to come.
	ScheduleTime *time.Time `json:"scheduleTime,omitempty"`
}

// Hibernating reports whether the spec asks for the cluster to hibernate.
func (s *ClusterSpec) Hibernating() bool {
	return s.Hibernation != nil && s.Hibernation.Enabled != nil && *s.Hibernation.Enabled
}

// IdleAfter returns spec.hibernation.idleAfter, or 0 when absent or not a positive duration.
func (s *ClusterSpec) IdleAfter() time.Duration {
	if s.Hibernation == nil || s.Hibernation.IdleAfter == "" {
		return 0
	}
	d, err := time.ParseDuration(s.Hibernation.IdleAfter)
	if err != nil || d <= 0 {
		return 0
	}
	return d
}

// MinIdleAfter bounds spec.hibernation.idleAfter from below.
const MinIdleAfter = time.Second

func validateHibernation(fe *FieldErrors, h *Hibernation, parse func(string) error) {
	if h == nil {
		return
	}
	if h.IdleAfter != "" {
		d, err := time.ParseDuration(h.IdleAfter)
		switch {
		case err != nil:
			fe.Add("spec.hibernation.idleAfter", "%q is not a duration such as 30m or 2h", h.IdleAfter)
		case d < MinIdleAfter:
			fe.Add("spec.hibernation.idleAfter", "%q must be at least %s", h.IdleAfter, MinIdleAfter)
		}
	}
	for i, s := range h.Schedules {
		path := "spec.hibernation.schedules[" + strconv.Itoa(i) + "]"
		if s.Start == "" && s.End == "" {
			fe.Add(path, "needs a start, an end or both (cron expressions such as \"0 19 * * 1-5\")")
		}
		for _, f := range []struct{ name, v string }{{"start", s.Start}, {"end", s.End}} {
			if f.v == "" || parse == nil {
				continue
			}
			if err := parse(f.v); err != nil {
				fe.Add(path+"."+f.name, "%q is not a cron expression of five fields (minute hour day-of-month month day-of-week), such as \"0 19 * * 1-5\": %v", f.v, err)
			}
		}
		if s.Location != "" {
			if _, err := time.LoadLocation(s.Location); err != nil {
				fe.Add(path+".location", "%q is not a time zone; use an IANA name such as \"Europe/Berlin\" or \"UTC\"", s.Location)
			}
		}
	}
}
