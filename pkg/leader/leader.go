package leader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/utils/clock"

	"github.com/hostplane/hostplane/pkg/store"
)

// ErrLost is returned by Hold when the lease could not be renewed in time or another replica
// holds it: the caller must stop working at once.
var ErrLost = errors.New("leader: lost the lease")

// Record is the lease's value.
type Record struct {
	Holder   string    `json:"holder"`
	Acquired time.Time `json:"acquired"`
	Renewed  time.Time `json:"renewed"`
}

// Config configures an Elector.
type Config struct {
	// KV is the lease bucket; its entries must expire TTL after they were written (MaxAge).
	KV jetstream.KeyValue
	// Name is the lease's key: what is led (a daemon's name).
	Name string
	// Identity names this replica; two live replicas must never share one.
	Identity string
	// TTL is the bucket's MaxAge. RenewDeadline (default TTL*3/5) is how long the holder
	// goes on without a renewal before it gives up; RetryPeriod (default TTL/10, at most a
	// second) is how often a standby looks.
	TTL, RenewDeadline, RetryPeriod time.Duration
	Log                             *slog.Logger
	Clock                           clock.Clock
	// OnChange is told when this replica starts or stops leading (metrics).
	OnChange func(leading bool)
}

// Elector takes, holds and gives back one lease for one replica.
type Elector struct {
	cfg      Config
	leases   *store.Store[Record]
	rev      uint64
	acquired time.Time
}

// New checks cfg and fills its defaults.
func New(cfg Config) (*Elector, error) {
	switch {
	case cfg.KV == nil || cfg.Name == "" || cfg.Identity == "":
		return nil, errors.New("leader: KV, Name and Identity are required")
	case cfg.TTL <= 0:
		return nil, errors.New("leader: TTL must be positive")
	}
	if cfg.RenewDeadline <= 0 {
		cfg.RenewDeadline = cfg.TTL * 3 / 5
	}
	if cfg.RenewDeadline >= cfg.TTL {
		return nil, fmt.Errorf("leader: the renew deadline %s must be shorter than the TTL %s", cfg.RenewDeadline, cfg.TTL)
	}
	if cfg.RetryPeriod <= 0 {
		cfg.RetryPeriod = min(cfg.TTL/10, time.Second)
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Elector{cfg: cfg, leases: store.New[Record](cfg.KV)}, nil
}

// Holder returns who holds the lease now ("" when nobody does).
func (e *Elector) Holder(ctx context.Context) (string, error) {
	r, _, err := e.leases.Get(ctx, e.cfg.Name)
	if errors.Is(err, store.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return r.Holder, nil
}

// Acquire blocks until this replica holds the lease (nil) or ctx ends (ctx's error).
// standby, when not nil, is told each new holder while this replica waits.
func (e *Elector) Acquire(ctx context.Context, standby func(holder string)) error {
	last := ""
	for {
		holder, err := e.try(ctx)
		switch {
		case err != nil:
			e.cfg.Log.Warn("leader election: cannot read or write the lease; retrying", "lease", e.cfg.Name, "err", err)
		case holder == e.cfg.Identity:
			e.cfg.Log.Info("leading", "lease", e.cfg.Name, "identity", e.cfg.Identity)
			e.changed(true)
			return nil
		case holder != last:
			last = holder
			e.cfg.Log.Info("standing by", "lease", e.cfg.Name, "leader", holder, "identity", e.cfg.Identity)
			if standby != nil {
				standby(holder)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-e.cfg.Clock.After(e.cfg.RetryPeriod):
		}
	}
}

// try takes the lease when nobody holds it or it still names this replica, and returns its
// holder.
func (e *Elector) try(ctx context.Context) (string, error) {
	now := e.cfg.Clock.Now()
	cur, rev, err := e.leases.Get(ctx, e.cfg.Name)
	switch {
	case errors.Is(err, store.ErrNotFound):
		rec := &Record{Holder: e.cfg.Identity, Acquired: now.UTC(), Renewed: now.UTC()}
		rev, err = e.leases.Create(ctx, e.cfg.Name, rec)
		if errors.Is(err, store.ErrExists) {
			return e.Holder(ctx) // another replica was faster
		}
		if err != nil {
			return "", err
		}
	case err != nil:
		return "", err
	case cur.Holder != e.cfg.Identity:
		return cur.Holder, nil
	default:
		// This replica's identity, from a process that is gone: take it back.
		rec := &Record{Holder: e.cfg.Identity, Acquired: now.UTC(), Renewed: now.UTC()}
		if rev, err = e.leases.Update(ctx, e.cfg.Name, rec, rev); err != nil {
			if errors.Is(err, store.ErrConflict) {
				return e.Holder(ctx)
			}
			return "", err
		}
	}
	e.rev, e.acquired = rev, now
	return e.cfg.Identity, nil
}

// Hold renews the lease every TTL/5 until ctx ends (nil) or it is lost (ErrLost): another
// replica holds it, or no renewal succeeded for RenewDeadline.
func (e *Elector) Hold(ctx context.Context) error {
	renewed := e.acquired
	every := e.cfg.TTL / 5
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-e.cfg.Clock.After(every):
		}
		start := e.cfg.Clock.Now()
		if left := e.cfg.RenewDeadline - start.Sub(renewed); left <= 0 {
			return e.lost(fmt.Errorf("%w: no renewal for %s", ErrLost, start.Sub(renewed).Round(time.Millisecond)))
		}
		rctx, cancel := context.WithTimeout(ctx, e.cfg.RenewDeadline-start.Sub(renewed))
		rec := &Record{Holder: e.cfg.Identity, Acquired: e.acquired.UTC(), Renewed: start.UTC()}
		rev, err := e.leases.Update(rctx, e.cfg.Name, rec, e.rev)
		cancel()
		switch {
		case err == nil:
			e.rev, renewed = rev, start
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrNotFound):
			holder, _ := e.Holder(ctx)
			return e.lost(fmt.Errorf("%w: it is now held by %q", ErrLost, holder))
		default:
			e.cfg.Log.Warn("leader election: renewing the lease failed; retrying", "lease", e.cfg.Name, "err", err,
				"left", (e.cfg.RenewDeadline - e.cfg.Clock.Since(renewed)).Round(time.Millisecond))
		}
	}
}

func (e *Elector) lost(err error) error {
	e.cfg.Log.Error("leader election: stopping work", "lease", e.cfg.Name, "identity", e.cfg.Identity, "err", err)
	e.changed(false)
	return err
}

// Release gives the lease back when this replica still holds it, so a standby takes over
// at once. Call it after the work it guarded stopped.
func (e *Elector) Release(ctx context.Context) error {
	if e.rev == 0 {
		return nil
	}
	defer e.changed(false)
	err := e.leases.Delete(ctx, e.cfg.Name, e.rev)
	e.rev = 0
	if errors.Is(err, store.ErrConflict) {
		return nil // someone else holds it already
	}
	return err
}

func (e *Elector) changed(leading bool) {
	if e.cfg.OnChange != nil {
		e.cfg.OnChange(leading)
	}
}
