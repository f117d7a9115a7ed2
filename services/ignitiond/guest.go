package ignitiond

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/guest"
	"github.com/hostplane/hostplane/pkg/store"
)

// Guest cluster objects ignitiond keeps (docs/nodepool-flow.md).
const (
	// BootstrapSecretPrefix + id is a pool's bootstrap token Secret in kube-system.
	BootstrapSecretPrefix = "bootstrap-token-"
	// NodeBootstrapperBinding binds the group system:bootstrappers to the ClusterRole
	// system:node-bootstrapper (create kubelet CSRs).
	NodeBootstrapperBinding = "hostplane:node-bootstrapper"

	bootstrappersGroup = "system:bootstrappers"
	nodeBootstrapper   = "system:node-bootstrapper"
	fieldManager       = "hostplane-ignitiond"
	guestTimeout       = 15 * time.Second
)

// liveBootstrap is a bootstrap token a pool's record serves: its id and when it expires, a
// join window after its Ignition token stops being valid (a machine that fetched its
// payload at the last moment still has that long to ask for its certificate).
type liveBootstrap struct {
	id      string
	expires time.Time
}

// liveBootstrap returns the bootstrap tokens of rec's Current and Previous.
func (d *Daemon) liveBootstrap(rec *api.IgnitionTokens) []liveBootstrap {
	live := []liveBootstrap{{id: rec.BootstrapID(rec.Current), expires: rec.Current.ExpiresAt.Add(d.cfg.JoinWindow)}}
	if p := rec.Previous; p != nil {
		end := p.ExpiresAt
		if p.ValidUntil != nil && p.ValidUntil.Before(end) {
			end = *p.ValidUntil
		}
		if id := rec.BootstrapID(*p); id != live[0].id {
			live = append(live, liveBootstrap{id: id, expires: end.Add(d.cfg.JoinWindow)})
		}
	}
	return live
}

// ensureBootstrap applies the guest bootstrap tokens live of pool np (ids, secrets derived,
// each with its expiration) and the node-bootstrapper binding, and deletes the pool's other
// bootstrap Secrets that would outlive a join window (kube-controller-manager's tokencleaner
// removes the others once expired). Once it succeeded for a set it is not repeated by this
// process.
func (d *Daemon) ensureBootstrap(ctx context.Context, cluster, np string, live []liveBootstrap, p *api.ClusterPKI) error {
	prefix := cluster + "/" + np + "/"
	done := prefix
	for _, b := range live {
		done += b.id + "@" + b.expires.UTC().Format(time.RFC3339) + ","
	}
	d.mu.Lock()
	ok := d.ensured[done]
	d.mu.Unlock()
	if ok {
		return nil
	}
	cl, err := d.guests.For(ctx, cluster)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, guestTimeout)
	defer cancel()
	opts := metav1.ApplyOptions{FieldManager: fieldManager, Force: true}
	keep := map[string]bool{}
	for _, b := range live {
		secret, err := d.bootstrapSecret(cluster, p, np, b.id)
		if err != nil {
			return err
		}
		sec := corev1ac.Secret(BootstrapSecretPrefix+b.id, metav1.NamespaceSystem).
			WithLabels(ownLabels(cluster, np)).
			WithType(corev1.SecretTypeBootstrapToken).
			WithData(map[string][]byte{
				"description":                    []byte("hostplane nodepool " + np + " (ignitiond)"),
				"token-id":                       []byte(b.id),
				"token-secret":                   []byte(secret),
				"expiration":                     []byte(b.expires.UTC().Format(time.RFC3339)),
				"usage-bootstrap-authentication": []byte("true"),
				"auth-extra-groups":              []byte(api.BootstrapGroupPrefix + np),
			})
		if _, err := cl.Clientset.CoreV1().Secrets(metav1.NamespaceSystem).Apply(ctx, sec, opts); err != nil {
			return fmt.Errorf("apply bootstrap token secret: %w", err)
		}
		keep[BootstrapSecretPrefix+b.id] = true
	}
	crb := rbacv1ac.ClusterRoleBinding(NodeBootstrapperBinding).
		WithLabels(map[string]string{api.LabelOwner: Name, api.LabelCluster: cluster}).
		WithRoleRef(rbacv1ac.RoleRef().WithAPIGroup("rbac.authorization.k8s.io").WithKind("ClusterRole").WithName(nodeBootstrapper)).
		WithSubjects(rbacv1ac.Subject().WithAPIGroup("rbac.authorization.k8s.io").WithKind("Group").WithName(bootstrappersGroup))
	if _, err := cl.Clientset.RbacV1().ClusterRoleBindings().Apply(ctx, crb, opts); err != nil {
		return fmt.Errorf("apply cluster role binding %s: %w", NodeBootstrapperBinding, err)
	}
	if err := d.deleteBootstrap(ctx, cl, np, keep); err != nil {
		return err
	}
	d.mu.Lock()
	for k := range d.ensured {
		if strings.HasPrefix(k, prefix) {
			delete(d.ensured, k)
		}
	}
	d.ensured[done] = true
	d.mu.Unlock()
	return nil
}

// removeBootstrap deletes every bootstrap token Secret of pool np from the guest cluster. A
// cluster whose admin kubeconfig is not issued has none.
func (d *Daemon) removeBootstrap(ctx context.Context, cluster, np string) error {
	cl, err := d.guests.For(ctx, cluster)
	if errors.Is(err, guest.ErrNotReady) {
		return nil
	}
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, guestTimeout)
	defer cancel()
	return d.deleteBootstrap(ctx, cl, np, nil)
}

// deleteBootstrap deletes bootstrap token Secrets ignitiond made in cluster cl. With keep
// nil: every one of pool np. Otherwise: pool np's not in keep that would outlive a join
// window from now (none expires sooner than that was made for a token still valid), and
// those of pools that have no token record any more (their removal failed while the guest
// cluster was unreachable).
func (d *Daemon) deleteBootstrap(ctx context.Context, cl *guest.Client, np string, keep map[string]bool) error {
	secrets := cl.Clientset.CoreV1().Secrets(metav1.NamespaceSystem)
	sel := map[string]string{api.LabelOwner: Name, api.LabelCluster: cl.Cluster}
	if keep == nil {
		sel[api.LabelNodePool] = np
	}
	list, err := secrets.List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(sel).String()})
	if err != nil {
		return fmt.Errorf("list bootstrap token secrets: %w", err)
	}
	horizon := d.cfg.Clock.Now().Add(d.cfg.JoinWindow)
	for _, s := range list.Items {
		pool := s.Labels[api.LabelNodePool]
		switch {
		case keep == nil:
		case pool == np && keep[s.Name]:
			continue
		case pool == np:
			if exp, err := time.Parse(time.RFC3339, string(s.Data["expiration"])); err == nil && !exp.After(horizon) {
				continue // a replaced token's, kept for its join window; the tokencleaner removes it
			}
		default:
			// Another pool's: an orphan only once the pool itself is gone. Its token record
			// is no test: a pool created at the same moment has none yet.
			_, _, err := d.nodepools.Get(ctx, api.NodePoolKey(cl.Cluster, pool))
			if !errors.Is(err, store.ErrNotFound) {
				continue // another live pool's (or unknown: leave it)
			}
			d.forgetEnsured(cl.Cluster + "/" + pool + "/")
		}
		if err := secrets.Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete bootstrap token secret %s: %w", s.Name, err)
		}
	}
	if keep == nil {
		d.forgetEnsured(cl.Cluster + "/" + np + "/")
	}
	return nil
}

// forgetEnsured drops the "applied" marks under prefix ("<cluster>/<nodepool>/"), so the
// next reconcile of that pool applies its guest objects again.
func (d *Daemon) forgetEnsured(prefix string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for k := range d.ensured {
		if strings.HasPrefix(k, prefix) {
			delete(d.ensured, k)
		}
	}
}

// ownLabels mark the guest objects of pool np.
func ownLabels(cluster, np string) map[string]string {
	return map[string]string{api.LabelOwner: Name, api.LabelCluster: cluster, api.LabelNodePool: np}
}
