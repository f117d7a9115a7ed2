package api_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hostplane/hostplane/pkg/api"
)

func TestValidateCluster_Hibernation_NamesEachBadField(t *testing.T) {
	// The parser clusterd passes (robfig/cron's standard one) is exercised in clusterd's
	// tests; here a stand-in that knows two expressions.
	parse := func(s string) error {
		if s == "0 19 * * 1-5" || s == "0 7 * * 1-5" {
			return nil
		}
		return errors.New("expected exactly 5 fields")
	}
	on := true
	for _, tc := range []struct {
		name   string
		h      *api.Hibernation
		fields []string
		detail string // a word the first field error must contain
	}{
		{"absent", nil, nil, ""},
		{"enabled", &api.Hibernation{Enabled: &on}, nil, ""},
		{"weekday nights in Berlin", &api.Hibernation{Schedules: []api.HibernationSchedule{
			{Start: "0 19 * * 1-5", End: "0 7 * * 1-5", Location: "Europe/Berlin"}}}, nil, ""},
		{"idleAfter", &api.Hibernation{IdleAfter: "30m"}, nil, ""},
		{"start only, UTC", &api.Hibernation{Schedules: []api.HibernationSchedule{{Start: "0 19 * * 1-5"}}}, nil, ""},
		{"bad cron", &api.Hibernation{Schedules: []api.HibernationSchedule{{Start: "19:00 weekdays", End: "0 7 * * 1-5"}}},
			[]string{"spec.hibernation.schedules[0].start"}, "cron"},
		{"bad zone", &api.Hibernation{Schedules: []api.HibernationSchedule{{}, {Start: "0 19 * * 1-5", Location: "Mars/Olympus"}}},
			[]string{"spec.hibernation.schedules[0]", "spec.hibernation.schedules[1].location"}, "start"},
		{"negative idleAfter", &api.Hibernation{IdleAfter: "-5m"}, []string{"spec.hibernation.idleAfter"}, "at least"},
		{"idleAfter not a duration", &api.Hibernation{IdleAfter: "half an hour"}, []string{"spec.hibernation.idleAfter"}, "duration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := api.Cluster{Spec: api.ClusterSpec{Release: api.Release{Version: "1.34.4"}, Hibernation: tc.h}}
			c.Name = "demo"
			c.Spec.Default()
			err := api.ValidateCluster(&c, api.ReleaseCatalogue{ParseSchedule: parse})
			var got []string
			var ae *api.Error
			if errors.As(err, &ae) {
				if ae.Code != api.CodeInvalid {
					t.Errorf("code %s, want %s", ae.Code, api.CodeInvalid)
				}
				for _, f := range ae.Fields {
					got = append(got, f.Field)
				}
				if tc.detail != "" && !strings.Contains(ae.Fields[0].Detail, tc.detail) {
					t.Errorf("detail %q does not say %q", ae.Fields[0].Detail, tc.detail)
				}
			} else if err != nil {
				t.Fatalf("not an api.Error: %v", err)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.fields) {
				t.Errorf("fields %v, want %v (%v)", got, tc.fields, err)
			}
		})
	}
}

func TestClusterSpec_Hibernating(t *testing.T) {
	on, off := true, false
	for _, tc := range []struct {
		h    *api.Hibernation
		want bool
	}{
		{nil, false},
		{&api.Hibernation{}, false},
		{&api.Hibernation{Enabled: &off, IdleAfter: "90s"}, false},
		{&api.Hibernation{Enabled: &on}, true},
	} {
		s := api.ClusterSpec{Hibernation: tc.h}
		if tc.h != nil && tc.h.IdleAfter == "90s" && s.IdleAfter() != 90*time.Second {
			t.Errorf("idleAfter %v, want 90s", s.IdleAfter())
		}
		if s.Hibernating() != tc.want {
			t.Errorf("%+v: hibernating %v, want %v", tc.h, s.Hibernating(), tc.want)
		}
	}
}
