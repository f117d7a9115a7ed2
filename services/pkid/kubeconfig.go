package pkid

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/auth"
	"github.com/hostplane/hostplane/pkg/certs"
	"github.com/hostplane/hostplane/pkg/httpapi"
	"github.com/hostplane/hostplane/pkg/kube"
)

// PathKubeconfigs is where a requester asks for a kubeconfig of its own.
const PathKubeconfigs = "/v1/clusters/{cluster}/kubeconfigs"

// anonymous names the requester of a kubeconfig when the API has no access control.
const anonymous = "anonymous"

// bindTimeout bounds the apply of the requesters' binding in the guest.
const bindTimeout = 10 * time.Second

// issueKubeconfig answers a kubeconfig whose client certificate is the requester's own:
// user hostplane:<token name>, group hostplane:cluster-admins (bound to cluster-admin in the
// guest), valid for the request's ttl. Nothing of it is stored: it expires, and the guest's
// audit log names who used it.
func (d *Daemon) issueKubeconfig(w http.ResponseWriter, r *http.Request) error {
	name, err := clusterParam(r)
	if err != nil {
		return err
	}
	var req api.KubeconfigRequest
	if r.ContentLength != 0 {
		if err := httpapi.DecodeJSON(r, &req); err != nil {
			return err
		}
	}
	ttl, err := kubeconfigTTL(req.TTL)
	if err != nil {
		return err
	}
	ctx := r.Context()
	c, _, err := d.clusters.Get(ctx, name)
	if err != nil {
		return notFound(name, err)
	}
	if c.DeletionTimestamp != nil {
		return api.Errorf(api.CodeConflict, "cluster %q is being deleted; no kubeconfig is issued for it", name)
	}
	p, _, err := d.pki.Get(ctx, name)
	if err != nil {
		return notFound(name, err)
	}
	if !p.Ready || p.KubeconfigServer == "" {
		return api.Errorf(api.CodeConflict, "the PKI of cluster %q is not ready yet: pkid issues it once the infrastructure is ready; see the PKIReady condition", name)
	}
	ca, err := d.bundler().keyPair(p.Certs[api.CertRootCA])
	if err != nil {
		return fmt.Errorf("open the root CA of %s: %w", name, err)
	}
	requester := anonymous
	if pr, ok := auth.FromContext(ctx); ok {
		requester = pr.Name
	}
	user := api.KubeconfigUserPrefix + requester
	kp, err := ca.Issue(certs.Request{CommonName: user, Organizations: []string{api.GroupClusterAdmins}, Usage: certs.UsageClient, Lifetime: ttl})
	if err != nil {
		return fmt.Errorf("issue the kubeconfig certificate of %s: %w", user, err)
	}
	keyPEM, err := kp.KeyPEM()
	if err != nil {
		return err
	}
	kc, err := kube.Kubeconfig(kube.KubeconfigSpec{
		Server: p.KubeconfigServer, CAPEM: ca.CertPEM(), ClientCertPEM: kp.CertPEM(), ClientKeyPEM: keyPEM,
		ClusterName: name, UserName: user,
	})
	if err != nil {
		return err
	}
	if err := d.bound.ensure(ctx, d, name, p.Serial); err != nil {
		// The certificate is valid; the binding is missing only in a cluster's first moments
		// (or while it is hibernated and pkid restarted): say so rather than refuse.
		w.Header().Set("Warning", fmt.Sprintf(`299 - "the guest's binding of %s to cluster-admin is not confirmed yet (%v); the kubeconfig is forbidden everything until pkid applies it"`,
			api.GroupClusterAdmins, err))
		d.Logger().Warn("issued a kubeconfig before the guest's binding was confirmed", "cluster", name, "user", user, "err", err)
	}
	d.metrics.kubeconfigs.Inc()
	d.Logger().Info("issued a kubeconfig", "cluster", name, "user", user, "expires", kp.Cert.NotAfter.UTC().Format(time.RFC3339))
	w.Header().Set("Content-Type", ContentTypeYAML)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Expires", kp.Cert.NotAfter.UTC().Format(http.TimeFormat))
	_, _ = w.Write(kc)
	return nil
}

// ContentTypeYAML is the media type of a kubeconfig answer.
const ContentTypeYAML = "application/yaml"

// kubeconfigTTL parses a request's ttl ("" is the default) within its range.
func kubeconfigTTL(s string) (time.Duration, error) {
	if s == "" {
		return api.DefaultKubeconfigTTL, nil
	}
	ttl, err := time.ParseDuration(s)
	if err != nil || ttl < api.MinKubeconfigTTL || ttl > api.MaxKubeconfigTTL {
		return 0, &api.Error{Code: api.CodeInvalid, Message: "invalid kubeconfig request", Fields: []api.FieldError{{
			Field: "ttl", Detail: fmt.Sprintf("must be a duration from %v to %v, such as 1h or 30m", api.MinKubeconfigTTL, api.MaxKubeconfigTTL)}}}
	}
	return ttl, nil
}

// RequestersBinding is the guest ClusterRoleBinding of api.GroupClusterAdmins to cluster-admin.
const RequestersBinding = api.GroupClusterAdmins

// bindings remembers the clusters (and PKI serial) whose guest has the requesters' binding.
type bindings struct {
	mu   sync.Mutex
	done map[string]string // cluster → PKI serial
}

// ensure applies the binding in cluster's guest unless this process did for serial.
func (b *bindings) ensure(ctx context.Context, d *Daemon, cluster, serial string) error {
	b.mu.Lock()
	ok := b.done[cluster] == serial
	b.mu.Unlock()
	if ok {
		return nil
	}
	gc, err := d.guests.For(ctx, cluster)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, bindTimeout)
	defer cancel()
	crb := rbacv1ac.ClusterRoleBinding(RequestersBinding).
		WithLabels(map[string]string{"app.kubernetes.io/managed-by": grantsManager}).
		WithRoleRef(rbacv1ac.RoleRef().WithAPIGroup(rbacv1.GroupName).WithKind("ClusterRole").WithName("cluster-admin")).
		WithSubjects(rbacv1ac.Subject().WithKind(rbacv1.GroupKind).WithAPIGroup(rbacv1.GroupName).WithName(api.GroupClusterAdmins))
	if _, err := gc.Clientset.RbacV1().ClusterRoleBindings().Apply(ctx, crb, metav1.ApplyOptions{FieldManager: grantsManager, Force: true}); err != nil {
		return fmt.Errorf("apply ClusterRoleBinding %s: %w", RequestersBinding, err)
	}
	b.mu.Lock()
	if b.done == nil {
		b.done = map[string]string{}
	}
	b.done[cluster] = serial
	b.mu.Unlock()
	return nil
}
