package decide_test

import (
	"testing"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/decide/decidetest"
)

// A cluster that turns to overlay addresses changes no machine, yet its
// machines leave the schedulable list until they report themselves in the
// mesh: the view reads its machines again instead of keeping what the
// last pass read of them.
func TestAClusterChangeIsSeenByTheView(t *testing.T) {
	h := decidetest.New(t)
	h.Cluster("c", decidetest.Group("g", "small", 1, 1))
	// A machine Gantry did not provision: no rollout replaces it.
	h.Machine("c", "g", "small", func(m *api.Machine) { m.Provider, m.ProviderKey = decidetest.External, decidetest.External })
	h.Service("web", "c", 0, "100m", "64Mi")
	for range 2 {
		if plan := h.Pass(); len(plan.Launches) != 0 {
			t.Fatalf("launched %+v", plan.Launches)
		}
	}
	h.Snap.Clusters["c"].Spec.Network = &api.NetworkSpec{Mode: api.NetworkOverlay}
	h.Pass()
	h.Service("web", "c", 1, "100m", "64Mi")
	for range 2 {
		if plan := h.Pass(); len(plan.Assignments) != 0 {
			t.Fatalf("placed %+v on a machine not in the mesh", plan.Assignments)
		}
	}
}
