package decide_test

import (
	"testing"
	"time"

	"github.com/gantry-dev/gantry/decide/decidetest"
)

// A pass that walks only the entries whose idle times could have changed
// (the last pass's view patched in place) still finds a machine that a
// longer minimum lifetime makes young again: a server started again with
// another --min-lifetime hands its passes the same memory. The harness
// decides each pass afresh too and compares; the wake is the machine's
// end of lifetime only if the walk saw it.
func TestAPartialIdleWalkSeesMachinesALongerMinLifetimeMakesYoung(t *testing.T) {
	h := decidetest.New(t)
	h.Config.Planner.MinLifetime = time.Minute
	h.Config.ResyncInterval, h.Config.ConsolidateInterval = 6*time.Hour, 0 // no other deadline wakes the pass first
	h.Cluster("c", decidetest.Group("g", "small", 0, 4))
	h.Service("web", "c", 3, "700m", "256Mi")
	h.Settle(30)
	h.Step(10 * time.Minute) // every machine older than its lifetime
	partly := false
	for i := 0; i < 4 && !partly; i++ { // the harness clears its scratch after every other pass
		h.Step(time.Second)
		h.Heartbeat()
		partly = h.Pass().Booked.PartlyWalkedView()
	}
	if !partly {
		t.Fatalf("no steady pass walked only part of its view")
	}
	h.Step(time.Second)
	h.Heartbeat()
	h.Pass() // after a clear: the next pass patches this one's view
	h.Config.Planner.MinLifetime = time.Hour
	h.Step(time.Second)
	h.Heartbeat()
	plan := h.Pass()
	created := h.Snap.Machines[0].CreatedAt
	for _, m := range h.Snap.Machines {
		if m.CreatedAt.Before(created) {
			created = m.CreatedAt
		}
	}
	if want := created.Add(time.Hour); plan.Wake.At.After(want) || plan.Wake.At.IsZero() {
		t.Fatalf("the pass wakes at %s, after the first machine's lifetime ends (%s)", plan.Wake.At, want)
	}
}
