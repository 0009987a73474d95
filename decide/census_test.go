package decide_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/decide/decidetest"
)

// A pass finds the groups gone from the spec from its count of the
// machines as it found them, as a walk would: one that changes no machine
// before it looks, and one that launched a machine first.
func TestRemovedGroupIsDrainedFromTheCount(t *testing.T) {
	for _, launches := range []int{0, 1} {
		h := decidetest.New(t)
		h.Cluster("c", decidetest.Group("g", "small", launches, 3))
		m := h.Machine("c", "other", "small")
		plan := h.Decide()
		if len(plan.Launches) != launches || len(plan.Drains) != 1 || plan.Drains[0].Machine != m.ID {
			t.Fatalf("min size %d: launches %+v, drains %+v", launches, plan.Launches, plan.Drains)
		}
	}
}

// The /24s the machines hold are counted: with both of a /23 held, a
// replica that needs another machine waits for a free one instead of
// launching it.
func TestHeldSubnetsAreCounted(t *testing.T) {
	h := decidetest.New(t)
	cl := h.Cluster("c", decidetest.Group("g", "small", 0, 5))
	cl.Spec.ContainerCIDR = "10.244.0.0/23"
	a, b := h.Machine("c", "g", "small"), h.Machine("c", "g", "small")
	h.Service("web", "c", 3, "1500m", "128Mi")
	h.Replica("web", 0, a.ID)
	h.Replica("web", 1, b.ID)
	plan := h.Decide()
	if len(plan.Launches) != 0 || !strings.Contains(plan.Pending["web-2"], "no free /24") {
		t.Fatalf("launches %+v, web-2 waits because %q", plan.Launches, plan.Pending["web-2"])
	}
}

// A stopped machine counts toward its group's warm pool: a pool of one
// that has it launches nothing.
func TestStoppedMachinesAreCounted(t *testing.T) {
	h := decidetest.New(t)
	g := decidetest.Group("g", "small", 0, 3)
	g.WarmPool, g.WarmPoolState = 1, api.WarmStopped
	h.Cluster("c", g)
	h.Machine("c", "g", "small", func(m *api.Machine) { m.FleetState = api.FleetStopped })
	plan := h.Decide()
	if len(plan.Launches)+len(plan.Starts) != 0 {
		t.Fatalf("the pool has its machine: launches %+v, starts %+v", plan.Launches, plan.Starts)
	}
}

// A machine launched under another provider key than its cluster's now
// (its settings changed) has that key listed too, for what it left.
func TestMachinesProviderKeysAreListed(t *testing.T) {
	h := decidetest.New(t)
	h.Cluster("c", decidetest.Group("g", "small", 0, 3))
	h.Machine("c", "g", "small", func(m *api.Machine) { m.ProviderKey = decidetest.Provider + ":before" })
	plan := h.Decide()
	if !slices.Contains(plan.Lists, decidetest.Provider+":before") {
		t.Fatalf("lists %v", plan.Lists)
	}
}
