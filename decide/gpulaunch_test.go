package decide_test

import (
	"testing"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/decide/decidetest"
)

// A GPU replica's machine is launched once: on its way, the machine
// has its instance type's GPUs, so the next passes count the replica as
// waiting for it, not as wanting another (each pass until it joined
// launched one more, up to the group's maxSize).
func TestAGPUReplicasMachineIsLaunchedOnce(t *testing.T) {
	h := decidetest.New(t)
	h.Cluster("c", decidetest.Group("g", "gpu", 0, 5))
	h.Service("train", "c", 1, "1", "1Gi", func(s *api.ServiceSpec) {
		s.Resources.GPU = &api.GPURequirement{Count: 1, Type: "a100", Policy: api.GPURequired}
	})
	if plan := h.Pass(); len(plan.Launches) != 1 {
		t.Fatalf("want one machine launched for train-0: %+v (pending %q)", plan.Launches, plan.Pending["train-0"])
	}
	for i := range 3 {
		if plan := h.Pass(); len(plan.Launches) != 0 {
			t.Fatalf("pass %d, the machine on its way: launched again %+v (pending %q)", i+2, plan.Launches, plan.Pending["train-0"])
		}
	}
	h.Join()
	h.Heartbeat()
	plan := h.Pass()
	if len(plan.Launches) != 0 || len(plan.Assignments) != 1 {
		t.Fatalf("joined: launches %+v, assignments %+v (pending %q)", plan.Launches, plan.Assignments, plan.Pending["train-0"])
	}
}
