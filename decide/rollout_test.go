package decide_test

import (
	"testing"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/decide"
	"github.com/gantry-dev/gantry/decide/decidetest"
	"github.com/gantry-dev/gantry/spec"
)

// A template change rolls the group one machine at a time (maxSurge 1):
// a replacement joins first, then an outdated machine drains (its replica
// moving new copy first) and goes; events mark the start and the end.
func TestTemplateChangeRollsMachinesOneAtATime(t *testing.T) {
	h := decidetest.New(t)
	cl := h.Cluster("c", decidetest.Group("g", "small", 2, 3))
	a, b := h.Machine("c", "g", "small"), h.Machine("c", "g", "small")
	h.Service("web", "c", 2, "600m", "128Mi")
	h.Replica("web", 0, a.ID)
	h.Replica("web", 1, b.ID)
	cl.Spec.Agent = &api.AgentTemplate{Version: "v2"}
	current := spec.TemplateHash(cl, "g")

	plan := h.Pass()
	if len(plan.Launches) != 1 || !hasEvent(plan, "RolloutStarted", "2 machine(s) run an old template") {
		t.Fatalf("want one replacement and a start event: %+v %+v", plan.Launches, plan.Events)
	}
	if len(plan.Drains) != 0 {
		t.Fatal("drained before the replacement joined")
	}
	if plan = h.Pass(); len(plan.Launches) != 0 {
		t.Fatalf("a second replacement while one is on its way (maxSurge 1): %+v", plan.Launches)
	}
	if _, ok := plan.Memory.Rollouts["c/g"]; !ok {
		t.Fatal("the rollout is not in memory")
	}
	h.Settle(30)
	completed := 0
	for _, e := range h.Events {
		if e.Reason == "RolloutComplete" {
			completed++
		}
	}
	if len(h.Memory.Rollouts) != 0 || completed != 1 {
		t.Fatalf("rollout not complete once: memory %v, %d completion events", h.Memory.Rollouts, completed)
	}
	live := 0
	for _, m := range h.Snap.Machines {
		live++
		if m.TemplateHash != current {
			t.Errorf("machine %s still runs template %s", m.ID, m.TemplateHash)
		}
	}
	for _, r := range h.Snap.Replicas {
		if r.State != api.ReplicaRunning || r.Machine == a.ID || r.Machine == b.ID {
			t.Errorf("replica %s: %s on %s", r.ID, r.State, r.Machine)
		}
	}
	if live > 3 {
		t.Errorf("%d machines live at the end (maxSize 3)", live)
	}
}

// Machines joined by hand are not Gantry's to replace: their group never
// starts a rollout for them (defect: an endless failing rollout launched
// a "replacement" with no instance type every pass).
func TestHandJoinedMachinesAreNotRolled(t *testing.T) {
	h := decidetest.New(t)
	h.Cluster("c", decidetest.Group("g", "small", 0, 3))
	h.Machine("c", "g", "small", func(m *api.Machine) {
		m.Provider, m.ProviderKey, m.ProviderID, m.TemplateHash, m.InstanceType = decidetest.External, decidetest.External, "", "", ""
	})
	for i := 0; i < 3; i++ {
		plan := h.Pass()
		if len(plan.Launches)+len(plan.Drains)+len(plan.Terminates) != 0 || hasEvent(plan, "RolloutStarted", "") {
			t.Fatalf("pass %d: launches %+v drains %+v terminates %+v events %+v", i, plan.Launches, plan.Drains, plan.Terminates, plan.Events)
		}
	}
}

// A rollout launch respects its group's backoff.
func TestRolloutLaunchesBackOff(t *testing.T) {
	h := decidetest.New(t)
	cl := h.Cluster("c", decidetest.Group("g", "small", 1, 2))
	h.Machine("c", "g", "small")
	cl.Spec.Agent = &api.AgentTemplate{Version: "v2"}
	h.Outcome(decide.Outcome{Call: decide.CallLaunch, Cluster: "c", Group: "g", Kind: "transport", Error: "boom"})
	if plan := h.Decide(); len(plan.Launches) != 0 {
		t.Fatalf("rollout launched during backoff: %+v", plan.Launches)
	}
}

// A stopped warm-pool machine with an old template is simply replaced.
func TestStoppedOutdatedMachineIsTerminated(t *testing.T) {
	h := decidetest.New(t)
	cl := h.Cluster("c", decidetest.Group("g", "small", 0, 2))
	m := h.Machine("c", "g", "small", func(m *api.Machine) { m.FleetState = api.FleetStopped })
	cl.Spec.Agent = &api.AgentTemplate{Version: "v2"}
	plan := h.Decide()
	if term := terminated(plan, m.ID); term == nil || term.Cause != decide.CauseRollout {
		t.Fatalf("%+v", plan.Terminates)
	}
}
