package pkid

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"k8s.io/utils/clock"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/observe"
	"github.com/hostplane/hostplane/pkg/outbox"
	"github.com/hostplane/hostplane/pkg/reconcile"
	"github.com/hostplane/hostplane/pkg/store"
)

// Event verbs pkid publishes (resource "pki"; listed in events.Published and docs/events.md).
const (
	VerbReady   = events.VerbPKIReady
	VerbRotated = events.VerbPKIRotated
	VerbDeleted = events.VerbPKIDeleted
)

const (
	// deletionPoll re-checks the controlplane bucket while waiting to delete (component
	// events trigger a reconcile too; this covers a lost one).
	deletionPoll = 5 * time.Second
	// infraWaitPoll re-checks a bundle whose infra is not ready, for renewals that are due.
	infraWaitPoll = 30 * time.Second
	// minRequeue bounds how soon a bundle is looked at again after a reconcile.
	minRequeue = 200 * time.Millisecond
)

// reconcile converges the PKI of cluster key.
func (d *Daemon) reconcile(ctx context.Context, key string) (reconcile.Result, error) {
	log := d.Logger().With("cluster", key)
	cluster, _, err := d.clusters.Get(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		d.stopApprover(key)
		return d.reconcileDelete(ctx, log, key)
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	if cluster.DeletionTimestamp != nil {
		d.stopApprover(key)
		return d.reconcileDelete(ctx, log, key)
	}
	res, err := d.reconcileLive(ctx, log, key, cluster)
	switch {
	case err != nil:
	case cluster.Spec.Hibernating():
		// Nothing of the guest runs: no informer retrying its closed port meanwhile. The
		// wake's component.available starts it again.
		d.stopApprover(key)
	default:
		d.syncApprover(ctx, log, key)
	}
	return res, err
}

// syncApprover runs the cluster's CSR approver once its PKI is ready and its kube-apiserver
// has been available (so the informer does not start against a control plane that is not
// there yet), and restarts it when the PKI serial changed. A failure is logged: the next
// reconcile (an event or the resync) tries again.
func (d *Daemon) syncApprover(ctx context.Context, log *slog.Logger, name string) {
	if d.approver == nil {
		return
	}
	p, _, err := d.pki.Get(ctx, name)
	if err != nil || !p.Ready {
		return
	}
	serial := d.approver.running(name)
	if serial == p.Serial {
		return
	}
	if serial == "" {
		comp, _, err := d.controlplane.Get(ctx, api.ComponentKey(name, api.ComponentKubeAPIServer))
		if err != nil || !comp.Status.Conditions.IsTrue(api.ConditionAvailable) {
			return // component.available triggers a reconcile
		}
	}
	if err := d.approver.ensure(ctx, name); err != nil {
		log.Warn("start the CSR approver", "err", err)
	}
}

func (d *Daemon) stopApprover(name string) {
	if d.approver != nil {
		d.approver.stop(name)
	}
}

// reconcileDelete waits until componentd removed every controlplane key of the cluster,
// then deletes the cluster's PKI and publishes pki.deleted.
func (d *Daemon) reconcileDelete(ctx context.Context, log *slog.Logger, name string) (reconcile.Result, error) {
	p, rev, err := d.pki.Get(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		d.metrics.forget(name)
		return reconcile.Result{}, nil
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	left, err := d.controlplane.Keys(ctx, api.ClusterPartsFilter(name))
	if err != nil {
		return reconcile.Result{}, err
	}
	if len(left) > 0 {
		slices.Sort(left)
		msg := fmt.Sprintf("cluster is being deleted; waiting for %d control-plane component(s) to be removed: %s",
			len(left), strings.Join(left, ", "))
		if p.Message != msg {
			p.Message = msg
			if _, err := d.pki.Update(ctx, name, p, rev); err != nil {
				return reconcile.Result{}, err
			}
			log.Info("waiting for control-plane components before deleting the pki", "components", left)
		}
		return reconcile.Result{RequeueAfter: deletionPoll}, nil
	}
	sent, err := d.record(ctx, name, VerbDeleted, nil)
	if err != nil {
		return reconcile.Result{}, err
	}
	if err := d.pki.Delete(ctx, name, rev); err != nil {
		return reconcile.Result{}, err
	}
	d.outbox.Send(ctx, sent)
	d.metrics.forget(name)
	log.Info("pki deleted")
	return reconcile.Result{}, nil
}

// reconcileLive issues the PKI of a live cluster once its infra is ready, and keeps it
// renewed and covering the infra.
func (d *Daemon) reconcileLive(ctx context.Context, log *slog.Logger, name string, cluster *api.Cluster) (reconcile.Result, error) {
	inf, _, err := d.infra.Get(ctx, name)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return reconcile.Result{}, err
	}
	infraReady := err == nil && inf.Ready

	p, rev, err := d.pki.Get(ctx, name)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return reconcile.Result{}, err
	}
	if p == nil && !infraReady {
		return reconcile.Result{}, nil // infra.ready triggers the issuance
	}
	if p != nil && !infraReady {
		// Keep the bundle as it is (renewals need the infra's hosts); look again later.
		d.metrics.observe(name, p)
		return reconcile.Result{RequeueAfter: max(untilNext(d.cfg.Clock, p), infraWaitPoll)}, nil
	}

	t, err := d.target(log, name, cluster, inf)
	if err != nil {
		// Nothing to retry until infrad writes a usable record (which publishes an event).
		log.Warn("cannot issue the pki", "err", err)
		return reconcile.Result{}, nil
	}
	b := d.bundler()

	if p == nil {
		return d.issue(ctx, log, name, cluster, t, b)
	}

	published := p.Serial
	p, pl, err := renew(ctx, log, name, p, t, b)
	if err != nil {
		return reconcile.Result{}, err
	}
	stepped, stepErr := d.stepKeyRotation(ctx, log, name, p, b)
	changed := !pl.empty() || stepped || p.Message != "" || p.ClusterGeneration != cluster.Generation
	p.Message = ""
	p.ClusterGeneration = cluster.Generation
	if changed {
		if err := d.writeRenewed(ctx, name, p, rev, published); err != nil {
			return reconcile.Result{}, err
		}
	}
	if !pl.empty() {
		d.metrics.rotated(name)
		log.Info("pki rotated", "serial", p.Serial, "reasons", pl.String(), "next_rotation", p.NextRotation)
	}
	d.metrics.observe(name, p)
	if stepErr != nil {
		return reconcile.Result{}, stepErr // the progress so far is stored; retried with backoff
	}
	if e := p.SecretEncryption; e != nil && e.Rotation != nil {
		// Component events wake the rotation too; this covers a lost one.
		return reconcile.Result{RequeueAfter: keyRotationPoll}, nil
	}
	return requeue(d.cfg.Clock, p), nil
}

// issue issues the first bundle of cluster name for target t and creates its record with
// pki.ready.
func (d *Daemon) issue(ctx context.Context, log *slog.Logger, name string, cluster *api.Cluster, t target, b *bundler) (reconcile.Result, error) {
	_, span := observe.StartSpan(ctx, "pkid issue", attribute.String("hostplane.cluster", name), attribute.Int("hostplane.leaves", len(t.leaves)))
	p, err := b.fresh(t)
	observe.EndSpan(span, err)
	if err != nil {
		return reconcile.Result{}, err
	}
	p.ClusterGeneration = cluster.Generation
	sent, err := d.record(ctx, name, VerbReady, p)
	if err != nil {
		return reconcile.Result{}, err
	}
	if _, err := d.pki.Create(ctx, name, p); err != nil {
		return reconcile.Result{}, err // ErrExists: another replica won; retry re-reads
	}
	d.outbox.Send(ctx, sent)
	log.Info("pki issued", "serial", p.Serial, "next_rotation", p.NextRotation)
	d.metrics.observe(name, p)
	return requeue(d.cfg.Clock, p), nil
}

// renew returns the bundle p becomes for target t and the plan that made it: the leaves
// and kubeconfigs due (lifetime, hosts, a CA change) reissued in place, or, for a record
// whose CAs cannot be opened (incomplete), a fresh bundle that keeps the Secret encryption
// keys. An empty plan leaves p as it is.
func renew(ctx context.Context, log *slog.Logger, name string, p *api.ClusterPKI, t target, b *bundler) (*api.ClusterPKI, plan, error) {
	cas, err := b.openCAs(p)
	switch {
	case errors.Is(err, ErrIncomplete):
		log.Warn("pki record is incomplete; issuing a new bundle", "err", err)
		fresh, err := b.fresh(t)
		if err != nil {
			return nil, plan{}, err
		}
		fresh.ObjectMeta = p.ObjectMeta
		if e := p.SecretEncryption; e != nil && len(e.Keys) > 0 {
			// The guest's etcd holds Secrets encrypted with these keys: a new key would
			// make them unreadable.
			fresh.SecretEncryption = e
		}
		return fresh, plan{kubeconfigs: "incomplete"}, nil
	case err != nil:
		return nil, plan{}, err
	}
	pl := b.plan(p, cas, t, b.clock.Now())
	if !pl.empty() {
		_, span := observe.StartSpan(ctx, "pkid rotate", attribute.String("hostplane.cluster", name), attribute.String("hostplane.reasons", pl.String()))
		err := b.apply(p, cas, t, pl)
		observe.EndSpan(span, err)
		if err != nil {
			return nil, plan{}, err
		}
	}
	return p, pl, nil
}

// writeRenewed updates the record of cluster name (revision rev) to p and, when its serial moved
// from published, sends pki.rotated (pki.ready when none was published) through the outbox.
func (d *Daemon) writeRenewed(ctx context.Context, name string, p *api.ClusterPKI, rev uint64, published string) error {
	var sent outbox.Entry
	if p.Serial != published {
		verb := VerbRotated
		if published == "" {
			verb = VerbReady
		}
		var err error
		if sent, err = d.record(ctx, name, verb, p); err != nil {
			return err
		}
	}
	if _, err := d.pki.Update(ctx, name, p, rev); err != nil {
		return err
	}
	d.outbox.Send(ctx, sent)
	return nil
}

// record stores the pki event verb about cluster name in the outbox; pki.ready and
// pki.rotated carry the new serial (p). It is called before the write the event is about (a
// failure leaves the record unwritten and the reconcile is retried); the entry is sent once
// the write succeeded, and published by the relay otherwise.
func (d *Daemon) record(ctx context.Context, name, verb string, p *api.ClusterPKI) (outbox.Entry, error) {
	var data any
	if p != nil {
		data = map[string]string{"serial": p.Serial}
	}
	e, err := d.outbox.Record(ctx, name, events.ResourcePKI, verb, name, data)
	if err != nil {
		return e, fmt.Errorf("record pki.%s of %s: %w", verb, name, err)
	}
	return e, nil
}

// target is what the PKI of cluster name (spec c) must look like on infra inf.
func (d *Daemon) target(log *slog.Logger, name string, c *api.Cluster, inf *api.Infra) (target, error) {
	life, problems := lifetimesOf(c.Spec.PKI, lifetimes{CA: d.cfg.CALifetime, Leaf: d.cfg.LeafLifetime})
	leaves, more, err := leafSpecs(c, inf)
	if err != nil {
		return target{}, err
	}
	for _, p := range append(problems, more...) {
		log.Warn("invalid cluster setting; using the default", "problem", p)
	}
	t := target{cluster: name, life: life, leaves: leaves, server: kubeconfigServer(inf)}
	switch typ := c.Spec.SecretEncryptionType(); typ {
	case api.SecretEncryptionAESCBC:
		t.encryption = typ
	default:
		// clusterd refuses any other type; keep whatever key the record holds.
		log.Warn("unsupported secret encryption type; keeping the current keys", "type", typ)
	}
	return t, nil
}

func (d *Daemon) bundler() *bundler {
	return &bundler{seal: d.seal, fraction: d.cfg.RenewFraction, clock: d.cfg.Clock}
}

// requeue asks to look at p again when its next leaf is due on clk.
func requeue(clk clock.PassiveClock, p *api.ClusterPKI) reconcile.Result {
	if p.NextRotation.IsZero() {
		return reconcile.Result{}
	}
	return reconcile.Result{RequeueAfter: untilNext(clk, p)}
}

// untilNext is how long until p's next leaf is due on clk. A fake clock (tests) does not
// fire the queue's timer: a test that steps it past NextRotation triggers a reconcile.
func untilNext(clk clock.PassiveClock, p *api.ClusterPKI) time.Duration {
	if p.NextRotation.IsZero() {
		return 0
	}
	return max(p.NextRotation.Sub(clk.Now()), minRequeue)
}
