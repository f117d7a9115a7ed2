package clusterd

import (
	"testing"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/hostplane/hostplane/pkg/api"
)

// hibernated is o with every component stopped for hibernation, as componentd records it.
func hibernated(o observed) observed {
	for _, n := range components {
		c := o.components[n]
		c.Status.ReadyReplicas = 0
		c.Status.Conditions.Set(api.Condition{Type: api.ConditionAvailable, Status: api.ConditionFalse, Reason: api.ReasonHibernated}, time.Unix(1, 0))
		c.Status.Conditions.Set(api.Condition{Type: api.ConditionRolloutComplete, Status: api.ConditionTrue, Reason: api.ReasonHibernated}, time.Unix(1, 0))
	}
	inf := *o.infra
	inf.Hibernated = true
	o.infra = &inf
	return o
}

func TestComputeStatus_Hibernation_SaysWhatIsTrueAtEachStep(t *testing.T) {
	on, off := true, false
	for _, tc := range []struct {
		name      string
		enabled   *bool
		reason    string
		o         observed
		hibStatus api.ConditionStatus
		hibReason string
		available api.ConditionStatus
		availWhy  string
	}{
		{"awake", nil, "", running("1.34.4"), api.ConditionFalse, ReasonAwake, api.ConditionTrue, ReasonAsExpected},
		{"asked, still running", &on, api.HibernationReasonSchedule, running("1.34.4"), api.ConditionFalse, ReasonHibernating, api.ConditionFalse, api.ReasonHibernated},
		{"hibernated on schedule", &on, api.HibernationReasonSchedule, hibernated(running("1.34.4")), api.ConditionTrue, api.HibernationReasonSchedule, api.ConditionFalse, api.ReasonHibernated},
		{"machines still running", &on, api.HibernationReasonSchedule, func() observed {
			o := hibernated(running("1.34.4"))
			o.infra.Hibernated = false
			return o
		}(), api.ConditionFalse, ReasonHibernating, api.ConditionFalse, api.ReasonHibernated},
		{"hibernated on request", &on, "", hibernated(running("1.34.4")), api.ConditionTrue, api.HibernationReasonRequested, api.ConditionFalse, api.ReasonHibernated},
		{"waking", &off, api.HibernationReasonRequested, hibernated(running("1.34.4")), api.ConditionFalse, ReasonResuming, api.ConditionFalse, ReasonComponentUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster("1.34.4")
			c.Spec.Hibernation = &api.Hibernation{Enabled: tc.enabled}
			if tc.reason != "" {
				c.Status.Hibernation = &api.HibernationStatus{Reason: tc.reason}
			}
			computeStatus(c, tc.o, time.Unix(100, 0))
			h, _ := c.Status.Conditions.Get(api.ConditionHibernated)
			if h.Status != tc.hibStatus || h.Reason != tc.hibReason {
				t.Errorf("Hibernated %s/%s (%s), want %s/%s", h.Status, h.Reason, h.Message, tc.hibStatus, tc.hibReason)
			}
			a, _ := c.Status.Conditions.Get(api.ConditionAvailable)
			if a.Status != tc.available || a.Reason != tc.availWhy {
				t.Errorf("Available %s/%s (%s), want %s/%s", a.Status, a.Reason, a.Message, tc.available, tc.availWhy)
			}
			if p, _ := c.Status.Conditions.Get(api.ConditionProgressing); tc.hibStatus == api.ConditionTrue && p.Status != api.ConditionFalse {
				t.Errorf("a hibernated cluster reports Progressing %s: %s", p.Status, p.Message)
			}
		})
	}
}

func TestScheduleTrigger_TheLatestStartOrEndSinceTheLastLookWins(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	weekdays := []api.HibernationSchedule{{Start: "0 19 * * 1-5", End: "0 7 * * 1-5", Location: "Europe/Berlin"}}
	// Monday 2026-11-23.
	at := func(day, hour, minute int) time.Time { return time.Date(2026, 11, day, hour, minute, 0, 0, berlin) }
	for _, tc := range []struct {
		name         string
		scheds       []api.HibernationSchedule
		after, now   time.Time
		due, hibern8 bool
	}{
		{"nothing fired", weekdays, at(23, 8, 0), at(23, 18, 59), false, false},
		{"the evening start", weekdays, at(23, 18, 59), at(23, 19, 0), true, true},
		{"the morning end", weekdays, at(23, 20, 0), at(24, 7, 1), true, false},
		{"start and end both passed: the end is later", weekdays, at(23, 18, 0), at(24, 8, 0), true, false},
		{"friday night to monday morning: the weekend has no end", weekdays, at(27, 18, 0), at(30, 6, 0), true, true},
		{"start only, UTC", []api.HibernationSchedule{{Start: "30 12 * * *"}}, time.Date(2026, 11, 23, 12, 29, 0, 0, time.UTC), time.Date(2026, 11, 23, 12, 30, 5, 0, time.UTC), true, true},
		{"the zone matters", []api.HibernationSchedule{{Start: "30 12 * * *", Location: "Asia/Tokyo"}}, time.Date(2026, 11, 23, 12, 29, 0, 0, time.UTC), time.Date(2026, 11, 23, 12, 30, 5, 0, time.UTC), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := scheduleTrigger(tc.scheds, tc.after, tc.now)
			if got.due != tc.due || (got.due && got.hibernate != tc.hibern8) {
				t.Errorf("trigger %+v, want due %v hibernate %v", got, tc.due, tc.hibern8)
			}
			if got.due && got.reason != api.HibernationReasonSchedule {
				t.Errorf("reason %q", got.reason)
			}
		})
	}
}

// The parser validation uses is the one the schedules run with.
func TestReleases_ParseScheduleIsCronStandard(t *testing.T) {
	for _, s := range []string{"0 19 * * 1-5", "@daily"} {
		if err := storedCatalogue.ParseSchedule(s); err != nil {
			t.Errorf("%q refused: %v", s, err)
		}
		if _, err := cron.ParseStandard(s); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
	if storedCatalogue.ParseSchedule("19:00 weekdays") == nil {
		t.Error("a non-cron schedule was accepted")
	}
}

// idleAfter only applies where the endpoint sees users' connections and not the daemons'.
func TestMeasuresActivity_OnlyWhereTheDaemonsDoNotUseTheEndpoint(t *testing.T) {
	ep := api.Endpoint{Host: "127.0.0.1", Port: 7000}
	one := []api.Endpoint{{Host: "127.0.0.1", Port: 7001}}
	two := []api.Endpoint{{Host: "127.0.0.1", Port: 7001}, {Host: "127.0.0.1", Port: 7002}}
	tests := []struct {
		name string
		inf  api.Infra
		want bool
	}{
		{"single apiserver behind the balancer", api.Infra{Endpoint: ep, APIServers: one}, true},
		{"single apiserver as the endpoint (before the balancer)", api.Infra{Endpoint: one[0], APIServers: one}, false},
		{"highly available with the internal listener", api.Infra{Endpoint: ep, APIServers: two, InternalEndpoint: &api.Endpoint{Host: "127.0.0.1", Port: 7003}}, true},
		{"highly available before the internal listener", api.Infra{Endpoint: ep, APIServers: two}, false},
		{"nothing allocated", api.Infra{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := measuresActivity(&tt.inf); got != tt.want {
				t.Errorf("measuresActivity = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestShortestInterval_OfCronSchedules(t *testing.T) {
	for spec, want := range map[string]time.Duration{
		"* * * * *":       time.Minute,
		"*/5 * * * *":     5 * time.Minute,
		"0 * * * *":       time.Hour,
		"0,30 9-17 * * *": 30 * time.Minute,
		"@every 2s":       2 * time.Second,
		"@daily":          24 * time.Hour,
		"0 0 * * 1,2":     24 * time.Hour,
	} {
		sch, err := cron.ParseStandard(spec)
		if err != nil {
			t.Fatal(err)
		}
		if got := shortestInterval(sch); got != want {
			t.Errorf("%q: %v, want %v", spec, got, want)
		}
	}
}
