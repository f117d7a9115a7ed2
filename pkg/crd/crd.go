package crd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// ErrNotEstablished reports CRDs the apiserver did not serve in time.
var ErrNotEstablished = errors.New("custom resource definitions not established")

// Load decodes every *.yaml file of fsys (in name order) as a CustomResourceDefinition.
func Load(fsys fs.FS) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	names, err := fs.Glob(fsys, "*.yaml")
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, n := range names {
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, err
		}
		c := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(b, c); err != nil {
			return nil, fmt.Errorf("crd %s: %w", path.Base(n), err)
		}
		if c.Kind != "CustomResourceDefinition" || c.Name == "" {
			return nil, fmt.Errorf("crd %s: not a CustomResourceDefinition", path.Base(n))
		}
		out = append(out, c)
	}
	return out, nil
}

// Install applies every CRD of fsys to the cluster of cfg with server-side apply as field
// manager owner, then waits (bounded by ctx and a minute) until each is Established and its
// resource is listed by discovery for every served version: a REST mapper built after Install
// returns (a controller-runtime manager's) then maps every kind of fsys. Established alone is
// not enough; discovery can lag it and a controller started in that gap fails with "no matches
// for kind".
func Install(ctx context.Context, cfg *rest.Config, fsys fs.FS, owner string) error {
	crds, err := Load(fsys)
	if err != nil {
		return err
	}
	return Apply(ctx, cfg, crds, owner)
}

// Apply is Install for CRDs already loaded (another module's embedded ones, or built in
// code): applied as owner, then waited for until established and in discovery. It sets each
// CRD's type meta and owner label.
func Apply(ctx context.Context, cfg *rest.Config, crds []*apiextensionsv1.CustomResourceDefinition, owner string) error {
	cs, err := apiextensions.NewForConfig(cfg)
	if err != nil {
		return err
	}
	api := cs.ApiextensionsV1().CustomResourceDefinitions()
	force := true
	for _, c := range crds {
		c.APIVersion, c.Kind = "apiextensions.k8s.io/v1", "CustomResourceDefinition"
		if c.Labels == nil {
			c.Labels = map[string]string{}
		}
		c.Labels["hostplane.dev/owner"] = owner
		body, err := yaml.Marshal(c)
		if err != nil {
			return err
		}
		if _, err := api.Patch(ctx, c.Name, "application/apply-patch+yaml", body,
			metav1.PatchOptions{FieldManager: owner, Force: &force}); err != nil {
			return fmt.Errorf("apply crd %s: %w", c.Name, err)
		}
	}
	waitCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for _, c := range crds {
		err := wait.PollUntilContextCancel(waitCtx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			got, err := api.Get(ctx, c.Name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			for _, cond := range got.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("%w: %s: %w", ErrNotEstablished, c.Name, err)
		}
		for _, v := range c.Spec.Versions {
			if !v.Served {
				continue
			}
			gv := c.Spec.Group + "/" + v.Name
			err := wait.PollUntilContextCancel(waitCtx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
				list, err := cs.Discovery().ServerResourcesForGroupVersion(gv)
				if err != nil {
					return false, nil
				}
				return slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool {
					return r.Name == c.Spec.Names.Plural
				}), nil
			})
			if err != nil {
				return fmt.Errorf("%w: %s not in discovery of %s: %w", ErrNotEstablished, c.Name, gv, err)
			}
		}
	}
	return nil
}
