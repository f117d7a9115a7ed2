package httpapi

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/hostplane/hostplane/pkg/api"
)

type patchRelease struct {
	Version string `json:"version"`
	Channel string `json:"channel,omitempty"`
}

type patchSpec struct {
	Release  patchRelease      `json:"release"`
	Replicas *int              `json:"replicas,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"`
	Zones    []string          `json:"zones,omitempty"`
}

func intp(n int) *int { return &n }

func TestApplySpecPatch(t *testing.T) {
	base := patchSpec{
		Release:  patchRelease{Version: "1.33.13", Channel: "stable"},
		Replicas: intp(3),
		Labels:   map[string]string{"a": "1", "b": "2"},
		Zones:    []string{"z1", "z2"},
	}
	tests := []struct {
		name      string
		patch     string
		want      patchSpec
		wantField string // a field error naming this field; want is ignored
	}{
		{name: "empty patch changes nothing", patch: `{}`, want: base},
		{name: "nested member merges", patch: `{"release":{"version":"1.34.4"}}`,
			want: patchSpec{Release: patchRelease{Version: "1.34.4", Channel: "stable"}, Replicas: intp(3), Labels: base.Labels, Zones: base.Zones}},
		{name: "null removes a member", patch: `{"replicas":null,"labels":{"a":null}}`,
			want: patchSpec{Release: base.Release, Labels: map[string]string{"b": "2"}, Zones: base.Zones}},
		{name: "arrays are replaced", patch: `{"zones":["z3"]}`,
			want: patchSpec{Release: base.Release, Replicas: intp(3), Labels: base.Labels, Zones: []string{"z3"}}},
		{name: "nulls inside a new object are dropped", patch: `{"labels":null,"release":{"channel":null}}`,
			want: patchSpec{Release: patchRelease{Version: "1.33.13"}, Replicas: intp(3), Zones: base.Zones}},
		{name: "unknown field is named by its path", patch: `{"release":{"versoin":"1.34.4"}}`, wantField: "spec.release.versoin"},
		{name: "wrong type is named by its path", patch: `{"replicas":"three"}`, wantField: "spec.replicas"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			patch, err := SpecOfPatch([]byte(tt.patch), `{}`)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ApplySpecPatch(context.Background(), base, patch)
			if tt.wantField != "" {
				var ae *api.Error
				if !errors.As(err, &ae) || ae.Code != api.CodeInvalid {
					t.Fatalf("err = %v, want an Invalid api.Error", err)
				}
				for _, f := range ae.Fields {
					if f.Field == tt.wantField {
						return
					}
				}
				t.Fatalf("field errors %+v do not name %q", ae.Fields, tt.wantField)
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}
