package decide_test

import (
	"testing"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/decide/decidetest"
)

// Replicas the planner places on a joined machine (a cordoned one, which
// scheduling leaves out) are told scheduling's reason: it counts every
// schedulable machine, the full ones too, although the pass places only
// on the machines with room (the explanation is made afresh once asked).
func TestSchedulingsReasonCountsTheFullMachines(t *testing.T) {
	h := decidetest.New(t)
	h.Cluster("c", decidetest.Group("g", "large", 3, 3))
	full := h.Machine("c", "g", "large")
	roomy := h.Machine("c", "g", "large")
	h.Machine("c", "g", "large", func(m *api.Machine) { m.Cordoned = true })
	h.Service("big", "c", 2, "3500m", "64Mi")
	h.Replica("big", 0, full.ID)
	h.Replica("big", 1, roomy.ID)
	h.Service("web", "c", 3, "1", "64Mi")
	h.Snap.Machines[1].Capacity.MilliCPU += 1000 // room for one web replica beside big-1
	plan := h.Pass()
	if len(plan.Assignments) != 1 || plan.Assignments[0].Placement.Machine != roomy.ID {
		t.Fatalf("assignments %+v, want one web replica on %s", plan.Assignments, roomy.ID)
	}
	want := "0/2 machines fit: 2 insufficient cpu"
	waiting := 0
	for id, why := range plan.Pending {
		if why != want {
			t.Errorf("%s waits because %q, want %q", id, why, want)
		}
		waiting++
	}
	if waiting != 2 {
		t.Errorf("%d replicas wait, want 2: %q", waiting, plan.Pending)
	}
}
