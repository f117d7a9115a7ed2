package kube

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// Probing an apiserver for a restart: every probeEvery, each probe given probeTimeout;
// downAfter failed probes in a row mean it went away.
const (
	probeEvery   = time.Second
	probeTimeout = 3 * time.Second
	downAfter    = 2
)

// AwaitReturn probes the /readyz of cfg's apiserver until ctx ends (false), or until the
// apiserver, after failing two probes in a row, answers again (true): it went away and came
// back, as on a restart. gone, if not nil, is called once with the error that marked it gone.
//
// Informers do not notice a restart in time on their own: client-go re-lists after a backoff
// that grows to 30 s over repeated failures, so a controller that wants a fresh cache after a
// restart builds it again when AwaitReturn says so.
func AwaitReturn(ctx context.Context, cfg *rest.Config, gone func(error)) (bool, error) {
	probe := rest.CopyConfig(cfg)
	probe.QPS, probe.Burst = -1, 0
	probe.GroupVersion = &schema.GroupVersion{}
	probe.NegotiatedSerializer = clientgoscheme.Codecs.WithoutConversion()
	rc, err := rest.UnversionedRESTClientFor(probe)
	if err != nil {
		return false, err
	}
	failed := 0
	t := time.NewTicker(probeEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false, nil
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, probeTimeout)
		err := rc.Get().AbsPath("/readyz").Do(pctx).Error()
		cancel()
		switch {
		case ctx.Err() != nil:
			return false, nil
		case err != nil:
			if failed++; failed == downAfter && gone != nil {
				gone(err)
			}
		case failed >= downAfter:
			return true, nil
		default:
			failed = 0
		}
	}
}
