package sim

import (
	"slices"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/decide"
	"github.com/gantry-dev/gantry/sim/trace"
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
		woke     string
	}{
		{"a start heard 1 s on, ticking every 2 s", 2 * time.Second,
			func(r *run) { r.heard.add(event{At: now.Add(time.Second), Kind: replicaStarts}) }, 2 * time.Second, wokeHeard},
		{"a start heard 5 s on, ticking every 2 s", 2 * time.Second,
			func(r *run) { r.heard.add(event{At: now.Add(5 * time.Second), Kind: replicaStarts}) }, 6 * time.Second, wokeHeard},
		{"a start heard already, ticking every 2 s", 2 * time.Second,
			func(r *run) { r.heard.add(event{At: now, Kind: replicaStarts}) }, 2 * time.Second, wokeHeard},
		{"a start heard 1 s on, no ticks", 0,
			func(r *run) { r.heard.add(event{At: now.Add(time.Second), Kind: replicaStarts}) }, time.Second, wokeHeard},
		{"a deadline 3 s on, ticking every 2 s", 2 * time.Second,
			func(r *run) { r.last = decide.Plan{Wake: decide.Wake{At: now.Add(3 * time.Second)}} }, 4 * time.Second, wokeDeadline},
		{"a launch answered 3 s on triggers a pass then", 2 * time.Second,
			func(r *run) { r.agenda.add(event{At: now.Add(3 * time.Second), Kind: launchAnswered}) }, 3 * time.Second, wokeWorld},
		{"an answer triggers, a start waits for the tick", 2 * time.Second, func(r *run) {
			r.agenda.add(event{At: now.Add(3 * time.Second), Kind: agentJoins})
			r.heard.add(event{At: now.Add(time.Second), Kind: replicaStarts})
		}, 2 * time.Second, wokeHeard},
		{"an answer due now is at this instant still", 2 * time.Second,
			func(r *run) { r.agenda.add(event{At: now, Kind: launchAnswered}) }, 0, wokeWorld},
		{"a row of demand before a deadline", 2 * time.Second, func(r *run) {
			r.setup.Trace.Rows = []trace.Row{{At: now.Add(time.Second)}}
			r.last = decide.Plan{Wake: decide.Wake{At: now.Add(3 * time.Second)}}
		}, time.Second, wokeTrace},
	}
	for _, c := range cases {
		r := newRun(c.interval)
		c.set(r)
		if got := r.nextInstant(now, false); !got.Equal(now.Add(c.want)) || r.woke != c.woke {
			t.Errorf("%s: next instant %s after now, for %q; want %s, for %q", c.name, got.Sub(now), r.woke, c.want, c.woke)
		}
	}
}

// Passes cut short are taken up a second later, for that reason.
func TestUnsettledPassesGoOnASecondLater(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := &run{setup: Setup{World: DefaultWorld()}, agenda: &agenda{}, heard: &agenda{}, bound: &bounder{}, cloud: &cloud{},
		ledger: newLedger(start, start.Add(time.Hour)), end: start.Add(time.Hour)}
	if got := r.nextInstant(start, true); !got.Equal(start.Add(time.Second)) || r.woke != wokeUnsettled {
		t.Errorf("next instant %s after the start, for %q; want 1s, for %q", got.Sub(start), r.woke, wokeUnsettled)
	}
}

// A pass's profile labels name what woke its instant, its place in the
// instant and the trace's day, counted from the first.
func TestAPassIsLabelledWithItsInstantPlaceAndDay(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := &run{ledger: newLedger(start, start.Add(72*time.Hour)), woke: wokeDeadline}
	cases := []struct {
		after time.Duration
		pass  int
		want  []string
	}{
		{0, 0, []string{"woke", wokeDeadline, "pass", "1", "day", "day1"}},
		{24*time.Hour - time.Second, 1, []string{"woke", wokeDeadline, "pass", "2", "day", "day1"}},
		{24 * time.Hour, 2, []string{"woke", wokeDeadline, "pass", "3+", "day", "day2"}},
		{50 * time.Hour, 7, []string{"woke", wokeDeadline, "pass", "3+", "day", "day3"}},
	}
	for _, c := range cases {
		r.w.Now = start.Add(c.after)
		if got := r.passLabels(c.pass); !slices.Equal(got, c.want) {
			t.Errorf("pass %d, %s after the start: labels %q, want %q", c.pass, c.after, got, c.want)
		}
	}
}
