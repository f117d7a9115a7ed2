package ignitiond

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/reconcile"
	"github.com/hostplane/hostplane/pkg/store"
)

// Event verbs ignitiond publishes (resource "ignition"; listed in events.Published and
// docs/events.md).
const (
	VerbReady   = events.VerbIgnitionReady
	VerbRotated = events.VerbIgnitionRotated
	VerbDeleted = events.VerbIgnitionDeleted
	VerbServer  = events.VerbIgnitionServer
)

// reconcileServer converges one cluster's Ignition server (key = cluster name) and enqueues
// the cluster's pools, which wait for it.
func (d *Daemon) reconcileServer(ctx context.Context, cluster string) (reconcile.Result, error) {
	log := d.log.With("cluster", cluster)
	c, _, err := d.clusters.Get(ctx, cluster)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return reconcile.Result{}, d.teardown(ctx, cluster, log)
	case err != nil:
		return reconcile.Result{}, err
	case c.DeletionTimestamp != nil:
		return reconcile.Result{}, d.teardown(ctx, cluster, log)
	}
	want, openErr := d.serve(ctx, cluster, log)
	if err := d.writeServer(ctx, cluster, want, log); err != nil {
		return reconcile.Result{}, errors.Join(openErr, err)
	}
	if openErr != nil {
		return reconcile.Result{}, openErr
	}
	pools, err := d.poolKeys(ctx, cluster)
	if err != nil {
		return reconcile.Result{}, err
	}
	for _, k := range pools {
		d.controller.EnqueueContext(ctx, k)
	}
	return reconcile.Result{}, nil
}

// serve opens (or keeps) the cluster's listener once infra and PKI are ready and returns the
// record that describes it. An error is a listener that should open and does not.
func (d *Daemon) serve(ctx context.Context, cluster string, log *slog.Logger) (api.IgnitionServer, error) {
	want := api.IgnitionServer{ObjectMeta: api.ObjectMeta{Name: cluster}}
	inf, _, err := d.infra.Get(ctx, cluster)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return want, err
	}
	if inf == nil || !inf.Ready || inf.Ignition.Host == "" || inf.Ignition.Port <= 0 {
		want.Message = "waiting for infrad to allocate the Ignition endpoint"
		return want, nil
	}
	want.Endpoint = net.JoinHostPort(inf.Ignition.Host, strconv.Itoa(inf.Ignition.Port))
	p, _, err := d.pki.Get(ctx, cluster)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return want, err
	}
	if p == nil || !p.Ready {
		want.Message = "waiting for pkid to issue the " + api.CertIgnitionServer + " certificate"
		return want, nil
	}
	cert, err := d.certificate(p)
	if err != nil {
		want.Message = err.Error()
		return want, err
	}
	addr := want.Endpoint
	if d.cfg.ListenHost != "" {
		addr = net.JoinHostPort(d.cfg.ListenHost, strconv.Itoa(inf.Ignition.Port))
	}
	opened, err := d.listeners.ensure(cluster, addr, cert, d.handler(cluster))
	if err != nil {
		want.Message = "listen on " + addr + ": " + err.Error()
		return want, fmt.Errorf("listen on %s: %w", addr, err)
	}
	if opened {
		log.Info("serving Ignition", "endpoint", want.Endpoint, "serial", p.Serial)
	}
	want.CertSerial = p.Serial
	want.Ready = true
	return want, nil
}

// certificate is the cluster's ignition-server certificate and key.
func (d *Daemon) certificate(p *api.ClusterPKI) (*tls.Certificate, error) {
	b, ok := p.Certs[api.CertIgnitionServer]
	if !ok || len(b.CertPEM) == 0 || len(b.SealedKey) == 0 {
		return nil, fmt.Errorf("%w in the PKI of %s", ErrNoCertificate, p.Name)
	}
	key, err := d.seal.Open(b.SealedKey)
	if err != nil {
		return nil, fmt.Errorf("open the %s key (is the seal key the one pkid uses?): %w", api.CertIgnitionServer, err)
	}
	cert, err := tls.X509KeyPair(b.CertPEM, key)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoCertificate, err)
	}
	return &cert, nil
}

// writeServer stores the cluster's record if it changed, with ignition.server recorded first.
func (d *Daemon) writeServer(ctx context.Context, cluster string, want api.IgnitionServer, log *slog.Logger) error {
	cur, rev, err := d.servers.Get(ctx, cluster)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	if cur != nil {
		want.ObjectMeta = cur.ObjectMeta
		if same(cur, &want) {
			return nil
		}
		want.Generation++
	}
	sent, err := d.record(ctx, cluster, VerbServer, log)
	if err != nil {
		return err
	}
	if cur != nil {
		_, err = d.servers.Update(ctx, cluster, &want, rev)
	} else {
		_, err = d.servers.Create(ctx, cluster, &want)
	}
	if err != nil {
		return err
	}
	d.outbox.Send(ctx, sent)
	log.Info("ignition server record", "endpoint", want.Endpoint, "ready", want.Ready, "serial", want.CertSerial, "message", want.Message)
	return nil
}

// teardown closes a deleting (or vanished) cluster's listener and deletes every ignition key
// of the cluster (each published as ignition.deleted). The guest cluster goes with it, so
// its bootstrap tokens are left alone.
func (d *Daemon) teardown(ctx context.Context, cluster string, log *slog.Logger) error {
	if d.listeners.close(cluster) {
		log.Info("cluster is deleting; closed its Ignition listener")
	}
	keys, err := d.tokens.Keys(ctx, api.ClusterPartsFilter(cluster))
	if err != nil {
		return err
	}
	for _, k := range keys {
		if err := d.deleteRecord(ctx, k, log); err != nil {
			return err
		}
	}
	if _, _, err := d.servers.Get(ctx, cluster); err == nil {
		sent, err := d.record(ctx, cluster, VerbDeleted, log)
		if err != nil {
			return err
		}
		if err := d.servers.Delete(ctx, cluster, 0); err != nil {
			return err
		}
		d.outbox.Send(ctx, sent)
	} else if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	d.cache.dropCluster(cluster)
	d.guests.Forget(cluster)
	d.mu.Lock()
	delete(d.bootstrap, cluster)
	d.mu.Unlock()
	return nil
}

// deleteRecord deletes a pool's token record (its tokens stop at once), with ignition.deleted
// recorded first.
func (d *Daemon) deleteRecord(ctx context.Context, key string, log *slog.Logger) error {
	sent, err := d.record(ctx, key, VerbDeleted, log)
	if err != nil {
		return err
	}
	if err := d.tokens.Delete(ctx, key, 0); err != nil {
		return err
	}
	d.outbox.Send(ctx, sent)
	d.index.remove(key, 0)
	log.Info("deleted the token record", "key", key)
	return nil
}

// same reports whether two records have the same JSON.
func same[T any](a, b *T) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}
