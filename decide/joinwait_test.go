package decide_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/decide/decidetest"
)

// A replica that waits for a machine on its way keeps naming it while
// that machine is still on its way, though the planner's pick moves as
// replicas come: the memory-heavy replicas added each pass, dealt
// between the CPU-heavy ones, shift the runs the planner deals to the
// machines. A new reason each pass was a write and an event for every
// waiting replica of a fleet's launch
// (TestAJoinWaitIsKeptOnlyWhileItsMachineIsOnItsWay has the edges).
func TestAReplicaKeepsWaitingForTheMachineOnItsWay(t *testing.T) {
	h := decidetest.New(t)
	h.Cluster("c", decidetest.Group("g", "small", 0, 10))
	h.Service("web", "c", 6, "500m", "64Mi")
	h.Service("mem", "c", 2, "100m", "400Mi")
	h.Pass() // launches three machines
	h.Step(time.Second)
	h.Pass()
	told := map[string]string{}
	for i := range 6 {
		r := h.ReplicaByID(fmt.Sprintf("web-%d", i))
		if !strings.HasPrefix(r.Reason, "waiting for machine ") {
			t.Fatalf("%s waits because %q, want a machine on its way", r.ID, r.Reason)
		}
		told[r.ID] = r.Reason
	}
	mem := h.ServiceByName("mem")
	moved := 0
	for pass := range 6 {
		*mem.Spec.Replicas += 2
		before := map[string]string{}
		for id := range told {
			before[id] = h.ReplicaByID(id).Reason
		}
		h.Step(time.Second)
		plan := h.Pass()
		for _, id := range plan.PendingChanged {
			was, ok := before[id]
			if ok && strings.HasPrefix(was, "waiting for machine ") && strings.HasPrefix(plan.Pending[id], "waiting for machine ") {
				t.Errorf("pass %d: %s, told %q, is told %q while that machine is on its way", pass+1, id, was, plan.Pending[id])
			}
		}
		for _, pl := range plan.Capacity.Placements {
			if was, ok := told[pl.Replica]; ok && strings.HasPrefix(pl.Machine, "c-g-") && was != "waiting for machine "+pl.Machine+" to join" {
				moved++
			}
		}
	}
	if moved == 0 {
		t.Fatalf("the planner never moved a waiting replica to another machine on its way: the test shows nothing")
	}
}
