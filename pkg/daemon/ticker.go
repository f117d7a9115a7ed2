package daemon

import (
	"context"
	"time"

	"k8s.io/utils/clock"
)

// Every returns a Runnable that calls fn at each tick of clk, every interval, until its
// context ends. A fake clock (tests) ticks when it is stepped.
func Every(clk clock.WithTicker, interval time.Duration, fn func(ctx context.Context)) Runnable {
	return RunnableFunc(func(ctx context.Context) error {
		t := clk.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-t.C():
				fn(ctx)
			}
		}
	})
}
