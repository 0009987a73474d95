package sim

import (
	"testing"
	"time"
)

// A bound planned beside the run is accounted as if it had been known
// when it was asked for: the time that passed while it was planned is
// owed and added in order once it is known, to the same sums, to the
// last digit, as a bound known at once.
func TestABoundPlannedBesideTheRunCountsFromWhenItWasAskedFor(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	end := start.Add(3 * time.Hour)
	known := func(v float64) *boundValue {
		b := &boundValue{done: make(chan struct{}), value: v}
		close(b.done)
		return b
	}
	steps := []time.Duration{7 * time.Second, 13 * time.Minute, 41 * time.Minute, time.Second, 90 * time.Minute, 3 * time.Minute}
	account := func(first, second *boundValue, planned func()) *ledger {
		l := newLedger(start, end)
		at := start
		l.boundBy(first)
		for i, step := range steps {
			if i == 2 {
				planned()
			}
			if i == 4 {
				l.boundBy(second)
			}
			l.advance(at, at.Add(step))
			at = at.Add(step)
		}
		l.finish()
		return l
	}
	want := account(known(1.37), known(2.91), func() {})
	if want.boundCost == 0 {
		t.Fatal("no bound was accounted")
	}

	// The first bound becomes known after two steps; the second is still
	// being planned when the run ends, and finish waits for it.
	pending := &boundValue{done: make(chan struct{})}
	slow := &boundValue{done: make(chan struct{})}
	go func() {
		slow.value = 2.91
		close(slow.done)
	}()
	got := account(pending, slow, func() {
		pending.value = 1.37
		close(pending.done)
	})
	if got.boundCost != want.boundCost {
		t.Errorf("bound cost %v, want %v (as if known at once)", got.boundCost, want.boundCost)
	}
	for i := range want.series {
		if got.series[i].BoundPerHour != want.series[i].BoundPerHour {
			t.Errorf("bucket %d: bound per hour %v, want %v", i, got.series[i].BoundPerHour, want.series[i].BoundPerHour)
		}
	}
}
