package decide_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/decide"
	"github.com/gantry-dev/gantry/decide/decidetest"
)

// A fleet that shrinks as its machines are booked afresh and laid out
// again keeps nothing it no longer lists: no list the booking or the
// scratch holds points to a machine past its end or outside the view.
// Each such pointer kept a layout of every machine from the collector
// (a week of 10,000 machines held gigabytes of them, and each later day
// took longer).
func TestNothingKeptPointsToMachinesNoLongerListed(t *testing.T) {
	h := decidetest.New(t)
	h.Config.LayOutShare = 0 // every machine booked afresh lays them all out again
	h.KeepScratch = true     // as a controller's, never cleared
	h.Cluster("c", decidetest.Group("g", "small", 0, 64))
	for i := range 24 {
		m := h.Machine("c", "g", "small")
		h.Service(fmt.Sprintf("s%02d", i), "c", 1, "100m", "64Mi")
		h.Replica(fmt.Sprintf("s%02d", i), 0, m.ID)
	}
	settle(h)
	laid := 0
	for round := range 12 {
		// A machine leaves the store with its service's replica and the
		// service, and another is relabelled: booked afresh.
		gone := h.Snap.Machines[len(h.Snap.Machines)-1]
		h.Snap.Machines = h.Snap.Machines[:len(h.Snap.Machines)-1]
		left := map[string]bool{}
		h.Snap.Replicas = slices.DeleteFunc(h.Snap.Replicas, func(r *api.Replica) bool {
			left[r.Service] = r.Machine == gone.ID
			return left[r.Service]
		})
		h.Snap.Services = slices.DeleteFunc(h.Snap.Services, func(s *api.Service) bool { return left[s.Metadata.Name] })
		at := round % len(h.Snap.Machines)
		relabelled := *h.Snap.Machines[at]
		relabelled.Labels = map[string]string{"round": fmt.Sprint(round)}
		h.Snap.Machines[at] = &relabelled
		plan := h.Pass()
		if plan.Booked.LaidOut() {
			laid++
		}
		if stale := decide.StaleMachines(plan.Booked, h.Scratch()); stale != "" {
			t.Fatalf("round %d: %s", round, stale)
		}
	}
	if laid < 6 {
		t.Fatalf("%d of 12 passes laid the machines out: the test shows nothing", laid)
	}
}
