package decide_test

import (
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/decide/decidetest"
	"github.com/gantry-dev/gantry/planner"
)

// A zone spread service while one of its zones has no capacity (a spot
// miss remembered there): the replicas that may go to the other zone
// get one machine there, launched once; the passes while it boots
// launch no other. (Found by gantry simulate in a world of spot misses:
// every pass launched another machine in the zone left.)
func TestAZoneSpreadLaunchesOnceWhileAZoneHasNoCapacity(t *testing.T) {
	h := decidetest.New(t)
	g := decidetest.Group("g", "large", 0, 10)
	g.CapacityType = api.CapacitySpot
	h.Cluster("c", g)
	h.Service("web", "c", 4, "500m", "128Mi", func(s *api.ServiceSpec) {
		s.Placement.Spread = []api.SpreadRule{{Key: api.SpreadZone, MaxSkew: 1}}
	})
	h.Memory.Unavailable[planner.OfferingKey("large", "b", api.CapacitySpot)] = h.Now.Add(time.Hour)
	launched := 0
	for pass := range 5 {
		plan := h.Pass()
		launched += len(plan.Launches)
		if launched > 1 {
			t.Fatalf("pass %d: %d machines launched in all for replicas one machine holds; pending: %v", pass+1, launched, plan.Pending)
		}
		h.Step(time.Second)
		h.Heartbeat()
	}
	if launched != 1 {
		t.Fatalf("%d machines launched, want one in zone a", launched)
	}
	// Once the machine joins, the scheduler runs the replicas there (as
	// kube-scheduler does, it counts the zones of the machines there are),
	// and no other machine is launched for them.
	h.Settle(20)
	running := 0
	for _, r := range h.Snap.Replicas {
		if r.State == api.ReplicaRunning {
			running++
		}
	}
	if running != 4 || len(h.Snap.Machines) != 1 {
		t.Fatalf("after the machine joined: %d replicas running on %d machines, want 4 on 1", running, len(h.Snap.Machines))
	}
}
