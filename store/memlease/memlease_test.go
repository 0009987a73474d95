package memlease

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/store"
	clocktesting "k8s.io/utils/clock/testing"
)

// The same terms as the PostgreSQL lease (store/postgres TestLeaseTerms):
// a renewal keeps the epoch, another holder waits for expiry or release,
// and a new term fences the old one.
func TestLeaseTerms(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	l, ctx := New(clk), context.Background()
	a, err := l.AcquireLease(ctx, "leader", "a", time.Minute)
	if err != nil || a.Epoch != 1 {
		t.Fatalf("first term: %+v %v", a, err)
	}
	if _, err := l.AcquireLease(ctx, "leader", "b", time.Minute); !errors.Is(err, store.ErrLeaseHeld) {
		t.Fatalf("b while a holds it: %v", err)
	}
	clk.Step(30 * time.Second)
	if renewed, err := l.AcquireLease(ctx, "leader", "a", time.Minute); err != nil || renewed.Epoch != 1 {
		t.Fatalf("renewal: %+v %v", renewed, err)
	}
	clk.Step(59 * time.Second)
	if err := l.Check(a); err != nil {
		t.Fatalf("a renewed term expired early: %v", err)
	}
	clk.Step(time.Second)
	if err := l.Check(a); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("an expired term still checks: %v", err)
	}
	b, err := l.AcquireLease(ctx, "leader", "b", time.Minute)
	if err != nil || b.Epoch != 2 {
		t.Fatalf("b after expiry: %+v %v", b, err)
	}
	if err := l.ReleaseLease(ctx, a); err != nil || l.Check(b) != nil {
		t.Fatal("releasing an old term ended the new one")
	}
	if err := l.ReleaseLease(ctx, b); err != nil || !errors.Is(l.Check(b), store.ErrFenced) {
		t.Fatal("a released term still checks")
	}
	if a2, err := l.AcquireLease(ctx, "leader", "a", time.Minute); err != nil || a2.Epoch != 3 {
		t.Fatalf("a after b released: %+v %v", a2, err)
	}
}
