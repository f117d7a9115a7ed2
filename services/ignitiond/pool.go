package ignitiond

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/ignition"
	"github.com/hostplane/hostplane/pkg/outbox"
	"github.com/hostplane/hostplane/pkg/reconcile"
	"github.com/hostplane/hostplane/pkg/store"
)

// minRequeue keeps a timer that is due now from spinning.
const minRequeue = 50 * time.Millisecond

// reconcilePool converges the token record of one pool (key "<cluster>.<nodepool>"): it
// reads what the record is made from, decides whether the token is minted or rotated, builds
// the userdata, creates the guest bootstrap token and writes the record with its event.
func (d *Daemon) reconcilePool(ctx context.Context, cluster, np string) (reconcile.Result, error) {
	key := api.NodePoolKey(cluster, np)
	log := d.log.With("cluster", cluster, "nodepool", np)
	in, err := d.poolInputs(ctx, cluster, np, log)
	if in == nil || err != nil {
		return reconcile.Result{}, err
	}
	cur, rev, err := d.tokens.Get(ctx, key)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return reconcile.Result{}, err
	}
	now := d.cfg.Clock.Now().UTC()
	next, verb := d.nextTokens(cluster, np, cur, in.pool, now)
	if err := d.setUserData(next, in); err != nil {
		return reconcile.Result{}, fmt.Errorf("userdata of %s: %w", key, err)
	}
	guestErr := d.ensureBootstrap(ctx, cluster, np, d.liveBootstrap(next), in.pki)
	if guestErr != nil && next.Message == "" {
		next.Message = "the guest bootstrap token is not created yet: " + guestErr.Error()
	}
	if cur == nil || !same(cur, next) {
		if err := d.writeTokens(ctx, key, cur, rev, next, verb, log); err != nil {
			return reconcile.Result{}, err
		}
	}
	if guestErr != nil {
		log.Info("guest bootstrap token not created yet; retrying", "retry_in", d.cfg.GuestRetry, "err", guestErr)
	}
	return reconcile.Result{RequeueAfter: d.nextTimer(next, now, guestErr != nil)}, nil
}

// poolInputs are what a pool's token record is made from.
type poolInputs struct {
	pool     *api.NodePool
	endpoint string // the Ignition server's host:port
	pki      *api.ClusterPKI
	rootCA   []byte
}

// poolInputs reads the pool, its Ignition server and its cluster's PKI. Nil inputs (and a
// nil error) mean there is nothing to do now: the pool or its cluster is going (its record
// is dropped here), nodepoold has not validated the pool yet, or the server is not ready
// (each of those enqueues the pool again when it changes).
func (d *Daemon) poolInputs(ctx context.Context, cluster, np string, log *slog.Logger) (*poolInputs, error) {
	c, _, err := d.clusters.Get(ctx, cluster)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	if c == nil || c.DeletionTimestamp != nil {
		// The guest cluster goes too: only the record.
		return nil, d.dropPool(ctx, cluster, np, false, log)
	}
	pool, _, err := d.nodepools.Get(ctx, api.NodePoolKey(cluster, np))
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	if pool == nil || pool.DeletionTimestamp != nil {
		return nil, d.dropPool(ctx, cluster, np, true, log)
	}
	if pool.Status.ConfigHash == "" {
		return nil, nil // nodepoold has not validated it yet; it publishes when it has
	}
	srv, _, err := d.servers.Get(ctx, cluster)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	if srv == nil || !srv.Ready {
		return nil, nil // the server's reconcile enqueues the pool once it is ready
	}
	p, _, err := d.pki.Get(ctx, cluster)
	if err != nil {
		return nil, err
	}
	rootCA := p.Certs[api.CertRootCA].CertPEM
	if len(rootCA) == 0 {
		return nil, fmt.Errorf("%s: %w", cluster, ErrNoRootCA)
	}
	return &poolInputs{pool: pool, endpoint: srv.Endpoint, pki: p, rootCA: rootCA}, nil
}

// nextTokens returns the record cur (of pool np of cluster) becomes at now, and the event verb when its token
// changes: a new token when the pool's config hash changed (VerbReady), a rotation when the
// current one is due (VerbRotated), "" otherwise. The token it replaces stays valid for the
// grace; a Previous whose grace is over is dropped.
func (d *Daemon) nextTokens(cluster, np string, cur *api.IgnitionTokens, pool *api.NodePool, now time.Time) (*api.IgnitionTokens, string) {
	next := &api.IgnitionTokens{ObjectMeta: api.ObjectMeta{Name: np}, Cluster: cluster, NodePool: np}
	if cur != nil {
		c := *cur
		next = &c
	}
	verb := ""
	switch {
	case cur == nil || cur.Current.ConfigHash != pool.Status.ConfigHash || cur.Current.Token == "":
		next.Previous = retire(next.Current, now, d.cfg.Grace)
		next.Current = mint(pool.Status.ConfigHash, pool.Spec.Release.Version, pool.Spec.Config, now, d.cfg.TokenTTL)
		verb = VerbReady
	case !now.Before(rotateAt(cur.Current)):
		next.Previous = retire(next.Current, now, d.cfg.Grace)
		next.Current = mint(cur.Current.ConfigHash, cur.Current.Release, cur.Current.Config, now, d.cfg.TokenTTL)
		verb = VerbRotated
	}
	if next.Previous != nil && (next.Previous.ValidUntil == nil || !now.Before(*next.Previous.ValidUntil)) {
		next.Previous = nil // its grace is over
	}
	next.NodePoolGeneration = pool.Generation
	return next, verb
}

// setUserData sets the record's userdata (the Ignition stub pointing at the server with the
// current token) and whether it is ready to be handed to machines.
func (d *Daemon) setUserData(next *api.IgnitionTokens, in *poolInputs) error {
	var err error
	next.UserData, err = ignition.Stub(ignition.StubInfo{URL: "https://" + in.endpoint + "/ignition", Token: next.Current.Token, CAPEM: in.rootCA})
	if err != nil {
		return err
	}
	next.Ready = true
	next.Message = ""
	if errs := ignition.ValidateDocuments(next.Current.Config); len(errs) > 0 {
		// nodepoold validates documents before it hashes them: this is a bug, not a user's
		// mistake. Machines would get a 500, so the userdata is not announced as ready.
		next.Ready = false
		next.Message = fmt.Sprintf("%s: %s", errs[0].Field, errs[0].Detail)
	}
	return nil
}

// writeTokens writes next over cur (revision rev; cur nil: creates it) and, when the token
// changed (verb) and the userdata is ready, sends the event through the outbox: recorded
// before the write, sent after it.
func (d *Daemon) writeTokens(ctx context.Context, key string, cur *api.IgnitionTokens, rev uint64, next *api.IgnitionTokens, verb string, log *slog.Logger) error {
	if verb != "" {
		next.Generation++
	}
	var sent outbox.Entry
	var err error
	if verb != "" && next.Ready {
		if sent, err = d.record(ctx, key, verb, log); err != nil {
			return err
		}
	}
	var nrev uint64
	if cur == nil {
		nrev, err = d.tokens.Create(ctx, key, next)
	} else {
		nrev, err = d.tokens.Update(ctx, key, next, rev)
	}
	if err != nil {
		return err
	}
	d.index.put(key, nrev, next)
	d.outbox.Send(ctx, sent)
	switch verb {
	case VerbReady:
		log.Info("minted a token for the pool's config hash", "hash", next.Current.ConfigHash, "expires", next.Current.ExpiresAt)
	case VerbRotated:
		d.metrics.rotations.Inc()
		log.Info("rotated the pool's token", "hash", next.Current.ConfigHash, "expires", next.Current.ExpiresAt)
	}
	return nil
}

// nextTimer is when rec needs another look: its rotation, its Previous's end of grace, or
// a retry of the guest bootstrap token.
func (d *Daemon) nextTimer(rec *api.IgnitionTokens, now time.Time, guestRetry bool) time.Duration {
	next := rotateAt(rec.Current).Sub(now)
	if rec.Previous != nil && rec.Previous.ValidUntil != nil {
		next = min(next, rec.Previous.ValidUntil.Sub(now))
	}
	if guestRetry {
		next = min(next, d.cfg.GuestRetry)
	}
	return max(next, minRequeue)
}

// dropPool removes a deleted pool's tokens: first it empties the record (the tokens stop at
// once, and stay stopped after a restart), then, when guest is set, deletes the pool's
// bootstrap token Secrets in the guest cluster, then the record (ignition.deleted).
func (d *Daemon) dropPool(ctx context.Context, cluster, np string, guest bool, log *slog.Logger) error {
	key := api.NodePoolKey(cluster, np)
	cur, rev, err := d.tokens.Get(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		d.index.remove(key, 0)
		return nil
	}
	if err != nil {
		return err
	}
	if guest {
		if cur.Current.Token != "" || cur.Previous != nil || cur.Ready {
			emptied := *cur
			emptied.Current, emptied.Previous, emptied.UserData = api.IgnitionToken{}, nil, nil
			emptied.Ready = false
			emptied.Message = "the nodepool is being deleted: removing its guest bootstrap token"
			nrev, err := d.tokens.Update(ctx, key, &emptied, rev)
			if err != nil {
				return err
			}
			d.index.put(key, nrev, &emptied)
		}
		if err := d.removeBootstrap(ctx, cluster, np); err != nil {
			d.mu.Lock()
			first, ok := d.dropping[key]
			if !ok {
				first = time.Now()
				d.dropping[key] = first
			}
			d.mu.Unlock()
			if time.Since(first) < d.cfg.GuestCleanupTimeout {
				return fmt.Errorf("remove the guest bootstrap token of %s: %w", key, err)
			}
			log.Warn("giving up removing the guest bootstrap token for now; the next bootstrap token applied in the cluster removes it",
				"after", d.cfg.GuestCleanupTimeout, "err", err)
		}
		d.mu.Lock()
		delete(d.dropping, key)
		d.mu.Unlock()
	}
	return d.deleteRecord(ctx, key, log)
}
