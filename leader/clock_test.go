package leader

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/store"
	"github.com/gantry-dev/gantry/store/memlease"
	clocktesting "k8s.io/utils/clock/testing"
)

// until polls cond (it waits for goroutines to act on a clock step, not
// for time to pass).
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("gave up waiting for %s", what)
}

// On the fake clock, with the in-memory lease: a leader cut off from the
// store ends its term — its context is cancelled, so its provider calls
// stop — exactly RenewDeadline after its last renewal began, while its
// lease still has LeaseDuration − RenewDeadline to run (the margin that
// covers a call in flight); nobody else can lead before the lease ends.
func TestTermEndsAtTheRenewDeadlineWithinTheLease(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(t0)
	leases := memlease.New(clk)
	cfg := Config{LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}
	a := New(cfg, leases, "a", clk, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	terms := make(chan context.Context, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.Run(ctx, func(termCtx context.Context, term store.Lease) {
			terms <- termCtx
			<-termCtx.Done()
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	termCtx := <-terms
	leases.Cut("a", true)
	// The renewals hang (each for a RetryPeriod of real time, the bound
	// the elector puts on a call) and fail; the term lives until the
	// deadline.
	for elapsed := time.Duration(0); elapsed < cfg.RenewDeadline-time.Second; elapsed += time.Second {
		clk.Step(time.Second)
		if termCtx.Err() != nil {
			t.Fatalf("the term ended %s after the last renewal, before its deadline %s", elapsed+time.Second, cfg.RenewDeadline)
		}
	}
	clk.SetTime(t0.Add(cfg.RenewDeadline))
	until(t, "the term to end at its renew deadline", func() bool { return termCtx.Err() != nil })
	if a.Leading() {
		t.Fatal("a leads after its term ended")
	}
	if _, err := leases.AcquireLease(context.Background(), LeaseName, "b", cfg.LeaseDuration); !errors.Is(err, store.ErrLeaseHeld) {
		t.Fatalf("b at the renew deadline: %v, want ErrLeaseHeld (the margin)", err)
	}
	clk.SetTime(t0.Add(cfg.LeaseDuration))
	if l, err := leases.AcquireLease(context.Background(), LeaseName, "b", cfg.LeaseDuration); err != nil || l.Epoch != 2 {
		t.Fatalf("b once a's lease ran out: %+v %v", l, err)
	}
}
