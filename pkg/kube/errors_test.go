package kube_test

import (
	"errors"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/hostplane/hostplane/pkg/kube"
)

func TestIsNotFound_IsTrueForAMissingObjectOrKind(t *testing.T) {
	machines := schema.GroupResource{Group: "cluster.x-k8s.io", Resource: "machines"}
	noKind := &meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: "cluster.x-k8s.io", Kind: "Machine"}, SearchedVersions: []string{"v1beta2"}}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"NotFound", apierrors.NewNotFound(machines, "m-0"), true},
		{"no kind (the CRD is not installed)", noKind, true},
		{"no kind, wrapped", fmt.Errorf("read Machine: %w", noKind), true},
		{"no resource", &meta.NoResourceMatchError{PartialResource: machines.WithVersion("v1beta2")}, true},
		{"forbidden", apierrors.NewForbidden(machines, "m-0", errors.New("no")), false},
		{"other", errors.New("connection refused"), false},
	} {
		if got := kube.IsNotFound(tc.err); got != tc.want {
			t.Errorf("%s: IsNotFound(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
