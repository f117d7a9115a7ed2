package daemon_test

import (
	"context"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/hostplane/hostplane/pkg/daemon"
	"github.com/hostplane/hostplane/pkg/testenv"
)

func TestEvery_CallsFnWhenTheClockTicksAndStopsWithItsContext(t *testing.T) {
	fake := clocktesting.NewFakeClock(time.Unix(0, 0))
	calls := make(chan time.Time, 1)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- daemon.Every(fake, time.Minute, func(context.Context) { calls <- fake.Now() }).Start(ctx)
	}()
	testenv.Eventually(t, 10*time.Second, fake.HasWaiters, "the ticker never started")
	select {
	case <-calls:
		t.Fatal("called before the clock ticked")
	default:
	}
	fake.Step(time.Minute)
	if at := <-calls; !at.Equal(time.Unix(60, 0)) {
		t.Errorf("called at %v, want one minute in", at)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Start returned %v", err)
	}
}
