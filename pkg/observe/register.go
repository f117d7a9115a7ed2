package observe

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Register registers c on reg, or returns the collector registered there before under the
// same description (a second controller sharing the registry, or a daemon run again
// in-process with the same registry). A nil reg registers nothing and returns c.
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if reg == nil {
		return c, nil
	}
	if err := reg.Register(c); err != nil {
		if are, ok := errors.AsType[prometheus.AlreadyRegisteredError](err); ok {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, err
	}
	return c, nil
}

// Registrar registers a constructor's collectors on one registry and keeps their errors, so
// that each registration is one expression (Add) and the constructor checks once (Err).
type Registrar struct {
	reg prometheus.Registerer
	err error
}

// NewRegistrar returns a Registrar for reg (nil: register nothing).
func NewRegistrar(reg prometheus.Registerer) *Registrar { return &Registrar{reg: reg} }

// Add registers c with r like Register and returns the collector to use: c, or the one
// registered before under the same description. An error is kept for Err.
func Add[C prometheus.Collector](r *Registrar, c C) C {
	c, err := Register(r.reg, c)
	r.err = errors.Join(r.err, err)
	return c
}

// Err is the errors of every Add so far, joined (nil if all succeeded).
func (r *Registrar) Err() error { return r.err }
