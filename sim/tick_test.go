package sim

import (
	"testing"
	"time"

	"github.com/gantry-dev/gantry/decide"
)

// What triggers no pass (a replica's start, heard in a heartbeat; a
// deadline of the last pass) is decided at the controller's next tick,
// ReconcileInterval after the last pass; what triggers one (a provider's
// answer) on the grain, at once.
func TestUntriggeredChangesWaitForTheNextTick(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := start.Add(10 * time.Second)
	newRun := func(interval time.Duration) *run {
		w := DefaultWorld()
		w.ReconcileInterval = interval
		return &run{setup: Setup{World: w}, agenda: &agenda{}, heard: &agenda{}, bound: &bounder{},
			cloud: &cloud{}, ledger: newLedger(start, start.Add(time.Hour)), end: start.Add(time.Hour)}
	}
	cases := []struct {
		name     string
		interval time.Duration
		set      func(r *run)
		want     time.Duration // after now
	}{
		{"a start heard 1 s on, ticking every 2 s", 2 * time.Second,
			func(r *run) { r.heard.add(event{At: now.Add(time.Second), Kind: replicaStarts}) }, 2 * time.Second},
		{"a start heard 5 s on, ticking every 2 s", 2 * time.Second,
			func(r *run) { r.heard.add(event{At: now.Add(5 * time.Second), Kind: replicaStarts}) }, 6 * time.Second},
		{"a start heard already, ticking every 2 s", 2 * time.Second,
			func(r *run) { r.heard.add(event{At: now, Kind: replicaStarts}) }, 2 * time.Second},
		{"a start heard 1 s on, no ticks", 0,
			func(r *run) { r.heard.add(event{At: now.Add(time.Second), Kind: replicaStarts}) }, time.Second},
		{"a deadline 3 s on, ticking every 2 s", 2 * time.Second,
			func(r *run) { r.last = decide.Plan{Wake: decide.Wake{At: now.Add(3 * time.Second)}} }, 4 * time.Second},
		{"a launch answered 3 s on triggers a pass then", 2 * time.Second,
			func(r *run) { r.agenda.add(event{At: now.Add(3 * time.Second), Kind: launchAnswered}) }, 3 * time.Second},
		{"an answer triggers, a start waits for the tick", 2 * time.Second, func(r *run) {
			r.agenda.add(event{At: now.Add(3 * time.Second), Kind: agentJoins})
			r.heard.add(event{At: now.Add(time.Second), Kind: replicaStarts})
		}, 2 * time.Second},
	}
	for _, c := range cases {
		r := newRun(c.interval)
		c.set(r)
		if got := r.nextInstant(now, false); !got.Equal(now.Add(c.want)) {
			t.Errorf("%s: next instant %s after now, want %s", c.name, got.Sub(now), c.want)
		}
	}
}
