package kube_test

import (
	"context"
	"testing"
	"time"

	"github.com/hostplane/hostplane/pkg/kube"
	"github.com/hostplane/hostplane/pkg/testenv"
)

func TestAwaitReturn_SaysSoWhenTheAPIServerRestarts(t *testing.T) {
	c := testenv.KubeAPIServer(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	type result struct {
		back bool
		err  error
	}
	done := make(chan result, 1)
	gone := make(chan error, 1)
	go func() {
		back, err := kube.AwaitReturn(ctx, c.RESTConfig, func(err error) { gone <- err })
		done <- result{back, err}
	}()

	// While the apiserver serves, it waits.
	time.Sleep(3 * time.Second)
	select {
	case r := <-done:
		t.Fatalf("AwaitReturn returned %+v while the apiserver was up", r)
	default:
	}

	if err := c.Restart(ctx); err != nil {
		t.Fatalf("restart: %v", err)
	}
	r := <-done
	if !r.back || r.err != nil {
		t.Fatalf("after a restart AwaitReturn = %v, %v; want true", r.back, r.err)
	}
	select {
	case err := <-gone:
		if err == nil {
			t.Error("gone was called with a nil error")
		}
	default:
		t.Error("gone was not called before the apiserver came back")
	}

	// Cancelled, it returns false.
	cctx, ccancel := context.WithCancel(ctx)
	go func() {
		back, err := kube.AwaitReturn(cctx, c.RESTConfig, nil)
		done <- result{back, err}
	}()
	ccancel()
	if r := <-done; r.back || r.err != nil {
		t.Fatalf("cancelled AwaitReturn = %v, %v; want false", r.back, r.err)
	}
}
