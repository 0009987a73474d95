package decide_test

import (
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/decide"
	"github.com/gantry-dev/gantry/decide/decidetest"
)

func spreadOverMachines(s *api.ServiceSpec) {
	s.Placement.Spread = []api.SpreadRule{{Key: api.SpreadMachine, MaxSkew: 1}}
}

// With minSize 2, maxSkew 1 and one machine joined while the other is on
// its way, 3 replicas do not pile onto the first: the one on its way is a
// spread domain, and a replica waits for it (defect: 3/0, never repaired).
func TestSpreadCountsMachinesOnTheirWay(t *testing.T) {
	h := decidetest.New(t)
	h.Cluster("c", decidetest.Group("g", "small", 2, 3))
	first := h.Machine("c", "g", "small")
	h.Machine("c", "g", "small", launching(h, "i-b"))
	h.Service("web", "c", 3, "200m", "64Mi", spreadOverMachines)
	plan := h.Pass()
	onFirst := 0
	for _, a := range plan.Assignments {
		if a.Placement.Machine == first.ID {
			onFirst++
		}
	}
	if onFirst != 2 {
		t.Fatalf("%d replicas placed on the joined machine, want 2 (skew 1 with the one on its way): %+v", onFirst, plan.Assignments)
	}
	waiting := 0
	for _, why := range plan.Pending {
		if strings.Contains(why, "to join") {
			waiting++
		}
	}
	if waiting != 1 || len(plan.Launches) != 0 {
		t.Fatalf("want one replica waiting for the second machine, nothing launched: pending %v launches %+v", plan.Pending, plan.Launches)
	}
	h.Settle(10)
	perMachine := map[string]int{}
	for _, r := range h.Snap.Replicas {
		perMachine[r.Machine]++
	}
	if len(perMachine) != 2 || perMachine[""] != 0 {
		t.Fatalf("replicas by machine: %v", perMachine)
	}
}

// Replicas with no spread rule do not wait for machines on their way.
func TestNoSpreadDoesNotWait(t *testing.T) {
	h := decidetest.New(t)
	h.Cluster("c", decidetest.Group("g", "small", 2, 3))
	first := h.Machine("c", "g", "small")
	h.Machine("c", "g", "small", launching(h, "i-b"))
	h.Service("web", "c", 3, "200m", "64Mi")
	plan := h.Pass()
	if len(plan.Assignments) != 3 {
		t.Fatalf("all 3 fit on %s now: %+v pending %v", first.ID, plan.Assignments, plan.Pending)
	}
}

// A spread that machine churn left violated (3/0) is repaired by moves,
// new copy first, at most MaxSpreadMoves per pass, and only while every
// replica of the service runs.
func TestViolatedSpreadIsRepairedByBoundedMoves(t *testing.T) {
	h := decidetest.New(t)
	h.Cluster("c", decidetest.Group("g", "small", 2, 3))
	full := h.Machine("c", "g", "small")
	empty := h.Machine("c", "g", "small")
	h.Service("web", "c", 3, "200m", "64Mi", spreadOverMachines)
	for i := 0; i < 3; i++ {
		h.Replica("web", i, full.ID)
	}
	plan := h.Pass()
	if len(plan.Assignments) != 1 || !plan.Assignments[0].Moving() || plan.Assignments[0].Placement.Machine != empty.ID ||
		!strings.Contains(plan.Assignments[0].Why, "spread machine maxSkew 1") {
		t.Fatalf("want one move to %s: %+v", empty.ID, plan.Assignments)
	}
	if plan = h.Pass(); len(plan.Assignments) != 0 {
		t.Fatalf("moved again while a move is under way: %+v", plan.Assignments)
	}
	h.Run()
	if plan = h.Pass(); len(plan.Assignments) != 0 {
		t.Fatalf("2/1 is within maxSkew 1: %+v", plan.Assignments)
	}
}

// A higher-priority replica that fits nowhere preempts a lower one, which
// goes back to pending.
func TestPreemption(t *testing.T) {
	h := decidetest.New(t)
	h.Cluster("c", decidetest.Group("g", "small", 1, 1))
	m := h.Machine("c", "g", "small")
	h.Service("batch", "c", 1, "800m", "64Mi")
	h.Replica("batch", 0, m.ID)
	h.Service("api", "c", 1, "800m", "64Mi", func(s *api.ServiceSpec) {
		s.Placement.Priority, s.Placement.PreemptLowerPriority = 10, true
	})
	plan := h.Pass()
	if len(plan.Evictions) != 1 || plan.Evictions[0].Replica != "batch-0" || plan.Evictions[0].By != "api-0" {
		t.Fatalf("evictions %+v", plan.Evictions)
	}
	if len(plan.Assignments) != 1 || plan.Assignments[0].Replica != "api-0" {
		t.Fatalf("assignments %+v", plan.Assignments)
	}
	if r := h.ReplicaByID("batch-0"); r.Machine != "" || r.State != api.ReplicaPending {
		t.Fatalf("the preempted replica: %+v", r)
	}
}

// Decide is pure: the snapshot it is given is not changed, and the same
// input decides the same plan.
func TestDecideLeavesTheSnapshotAlone(t *testing.T) {
	h := decidetest.New(t)
	h.Cluster("c", decidetest.Group("g", "small", 2, 3))
	m := h.Machine("c", "g", "small", func(m *api.Machine) { m.FleetState = api.FleetDraining })
	h.Service("web", "c", 2, "200m", "64Mi")
	h.Replica("web", 0, m.ID)
	before := *h.Snap.Machines[0]
	replicaBefore := *h.Snap.Replicas[0]
	a := decide.Decide(h.Config, h.Snap, h.Memory, h.Now)
	b := decide.Decide(h.Config, h.Snap, h.Memory, h.Now)
	if h.Snap.Machines[0].FleetState != before.FleetState || h.Snap.Replicas[0].Machine != replicaBefore.Machine || h.Snap.Replicas[0].PreviousMachine != "" {
		t.Fatal("decide changed its snapshot")
	}
	if len(a.Assignments) != len(b.Assignments) || len(a.Launches) != len(b.Launches) || len(a.CreateReplicas) != len(b.CreateReplicas) {
		t.Fatalf("two decisions on one input differ: %+v / %+v", a, b)
	}
}

// A cordoned machine takes no new replicas; those it runs stay.
func TestCordonedMachineTakesNoNewReplicas(t *testing.T) {
	h := decidetest.New(t)
	h.Cluster("c", decidetest.Group("g", "large", 2, 2))
	a := h.Machine("c", "g", "large", func(m *api.Machine) { m.Cordoned = true })
	b := h.Machine("c", "g", "large")
	h.Service("web", "c", 3, "100m", "64Mi")
	h.Replica("web", 0, a.ID)
	plan := h.Pass()
	if len(plan.Assignments) != 2 {
		t.Fatalf("assignments: %+v", plan.Assignments)
	}
	for _, as := range plan.Assignments {
		if as.Placement.Machine != b.ID {
			t.Fatalf("%s placed on the cordoned machine", as.Replica)
		}
	}
	if r := h.ReplicaByID("web-0"); r.Machine != a.ID {
		t.Fatal("the replica on the cordoned machine moved")
	}
}

// On an overlay, every placement — a spread repair's move included —
// gives the replica an address of its own in its machine's /24.
func TestOverlayPlacementsTakeAddressesOfTheMachinesSubnet(t *testing.T) {
	h := decidetest.New(t)
	h.Cluster("c", decidetest.Group("g", "small", 2, 3))
	h.Snap.Clusters["c"].Spec.Network = &api.NetworkSpec{Mode: api.NetworkOverlay}
	inMesh := []api.Condition{{Type: api.ConditionNetworkReady, Status: "True"}}
	full := h.Machine("c", "g", "small", func(m *api.Machine) { m.Subnet, m.Conditions = "10.244.0.0/24", inMesh })
	empty := h.Machine("c", "g", "small", func(m *api.Machine) { m.Subnet, m.Conditions = "10.244.1.0/24", inMesh })
	h.Service("web", "c", 3, "200m", "64Mi", spreadOverMachines)
	for i := 0; i < 3; i++ {
		h.Replica("web", i, full.ID)
	}
	plan := h.Pass()
	if len(plan.Assignments) != 1 || plan.Assignments[0].Placement.Machine != empty.ID || plan.Assignments[0].Placement.Address != "10.244.1.2" {
		t.Fatalf("want one move to %s at 10.244.1.2 (the first after the machine's own): %+v", empty.ID, plan.Assignments)
	}
}
