package decide_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/decide"
	"github.com/gantry-dev/gantry/decide/decidetest"
	"github.com/gantry-dev/gantry/planner"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/replica"
)

// From nothing: minSize machines are launched at once, replicas wait for
// them with a reason, then run on them once they joined.
func TestScaleUpFromEmpty(t *testing.T) {
	h := decidetest.New(t)
	h.Cluster("c", decidetest.Group("g", "small", 2, 4))
	h.Service("web", "c", 3, "500m", "128Mi")
	plan := h.Pass()
	if len(plan.CreateReplicas) != 3 || len(plan.Launches) != 2 {
		t.Fatalf("want 3 replicas and 2 launches (minSize), got %d and %+v", len(plan.CreateReplicas), plan.Launches)
	}
	for id, why := range plan.Pending {
		if !strings.Contains(why, "waiting for a new small machine") {
			t.Errorf("%s waits because %q", id, why)
		}
	}
	if plan.Memory.Desired["c/g"] != 2 || plan.Capacity.Desired["c/g"] != 2 {
		t.Errorf("desired: memory %v, plan %v", plan.Memory.Desired, plan.Capacity.Desired)
	}
	h.Join()
	plan = h.Settle(10)
	placed := map[string]int{}
	for _, r := range h.Snap.Replicas {
		placed[r.Machine]++
		if r.State != api.ReplicaRunning {
			t.Errorf("replica %s is %s", r.ID, r.State)
		}
	}
	if len(placed) != 2 || placed[""] != 0 {
		t.Fatalf("replicas by machine: %v", placed)
	}
	if len(h.Snap.Machines) != 2 {
		t.Fatalf("%d machines, want 2", len(h.Snap.Machines))
	}
}

// A replica larger than any machine of its group waits, saying why, and
// nothing is launched for it.
func TestPendingReasonWhenNothingCanHoldIt(t *testing.T) {
	h := decidetest.New(t)
	h.Cluster("c", decidetest.Group("g", "small", 0, 3))
	h.Service("huge", "c", 1, "3", "128Mi")
	plan := h.Pass()
	if len(plan.Launches) != 0 {
		t.Fatalf("launched for a replica no type holds: %+v", plan.Launches)
	}
	if why := plan.Pending["huge-0"]; !strings.HasPrefix(why, api.ReasonUnschedulable) || !strings.Contains(why, "no machine can be added") || !strings.Contains(why, "insufficient cpu") {
		t.Fatalf("reason %q, want it unschedulable (no machine of the cluster would ever hold it)", why)
	}
}

// At maxSize, more replicas wait and say so.
func TestMaxSizeIsAReason(t *testing.T) {
	h := decidetest.New(t)
	h.Cluster("c", decidetest.Group("g", "small", 0, 1))
	m := h.Machine("c", "g", "small")
	h.Service("web", "c", 3, "600m", "128Mi")
	h.Replica("web", 0, m.ID)
	plan := h.Pass()
	if len(plan.Launches) != 0 {
		t.Fatalf("launched beyond maxSize: %+v", plan.Launches)
	}
	for _, id := range []string{"web-1", "web-2"} {
		if !strings.Contains(plan.Pending[id], "maxSize 1") || strings.HasPrefix(plan.Pending[id], api.ReasonUnschedulable) {
			t.Errorf("%s: %q, want the group's maxSize, and not unschedulable (room may come)", id, plan.Pending[id])
		}
	}
}

// A failed launch backs its group off: no launch until the backoff
// passes, twice as long after the next failure; a success clears it.
func TestLaunchBackoffDoublesAndClears(t *testing.T) {
	h := decidetest.New(t)
	h.Config.LaunchBackoff, h.Config.MaxLaunchBackoff = 10*time.Second, time.Minute
	h.Cluster("c", decidetest.Group("g", "small", 1, 2))
	h.Outcome(decide.Outcome{Call: decide.CallLaunch, Cluster: "c", Group: "g", InstanceType: "small", Kind: provisioner.KindTransport, Error: "connection reset"})
	plan := h.Decide()
	if len(plan.Launches) != 0 || plan.Memory.Backoff["c/g"].Failures != 1 {
		t.Fatalf("after a failure: launches %+v, backoff %+v", plan.Launches, plan.Memory.Backoff)
	}
	if len(plan.Memory.Outcomes) != 0 {
		t.Fatal("the outcome stays in memory after it was folded in")
	}
	h.Step(9 * time.Second)
	if plan = h.Decide(); len(plan.Launches) != 0 {
		t.Fatal("launched before the backoff passed")
	}
	h.Step(2 * time.Second)
	if plan = h.Decide(); len(plan.Launches) != 1 {
		t.Fatalf("no launch after the backoff: %+v", plan)
	}
	h.Outcome(decide.Outcome{Call: decide.CallLaunch, Cluster: "c", Group: "g", InstanceType: "small", Kind: provisioner.KindTransport, Error: "again"})
	plan = h.Decide()
	if b := plan.Memory.Backoff["c/g"]; b.Failures != 2 || !b.Until.Equal(h.Now.Add(20*time.Second)) {
		t.Fatalf("second failure: %+v, want 20s", b)
	}
	h.Outcome(decide.Outcome{Call: decide.CallLaunch, Cluster: "c", Group: "g", InstanceType: "small"})
	if plan = h.Decide(); len(plan.Memory.Backoff) != 0 || len(plan.Launches) != 1 {
		t.Fatalf("a success must clear the backoff: %+v, launches %d", plan.Memory.Backoff, len(plan.Launches))
	}
}

// Refused credentials: the ProviderReady condition turns false with an
// event, launches back off; a later success turns it true again.
func TestAuthFailureIsACondition(t *testing.T) {
	h := decidetest.New(t)
	h.Cluster("c", decidetest.Group("g", "small", 1, 2))
	h.Outcome(decide.Outcome{Call: decide.CallLaunch, Cluster: "c", Group: "g", Kind: provisioner.KindAuth, Error: "auth: invalid key"})
	plan := h.Decide()
	cond := plan.Memory.Conditions[decide.ConditionKey("c", api.ConditionProviderReady)]
	if cond.Status != "False" || cond.Reason != "AuthFailed" || !strings.Contains(cond.Message, "invalid key") {
		t.Fatalf("condition %+v", cond)
	}
	if len(plan.Launches) != 0 || !hasEvent(plan, api.ConditionProviderReady, "refuses the credentials") {
		t.Fatalf("launches %+v, events %+v", plan.Launches, plan.Events)
	}
	h.Step(time.Hour)
	h.Outcome(decide.Outcome{Call: decide.CallLaunch, Cluster: "c", Group: "g"})
	plan = h.Decide()
	if c := plan.Memory.Conditions[decide.ConditionKey("c", api.ConditionProviderReady)]; c.Status != "True" || !hasEvent(plan, api.ConditionProviderReady, "accepts the credentials again") {
		t.Fatalf("after success: %+v %+v", c, plan.Events)
	}
}

// A capacity miss makes the offering unavailable for UnavailableTTL:
// spot falls back to on demand, and spot is tried again after.
func TestCapacityMissFallsBack(t *testing.T) {
	h := decidetest.New(t)
	g := decidetest.Group("g", "small", 0, 3)
	g.CapacityType, g.Zones = api.CapacityAny, []string{"a"}
	h.Cluster("c", g)
	h.Service("web", "c", 1, "500m", "128Mi")
	plan := h.Decide()
	if len(plan.Launches) != 1 || plan.Launches[0].CapacityType != api.CapacitySpot {
		t.Fatalf("spot first: %+v", plan.Launches)
	}
	h.Outcome(decide.Outcome{Call: decide.CallLaunch, Cluster: "c", Group: "g", InstanceType: "small", Zone: "a", CapacityType: api.CapacitySpot,
		Kind: provisioner.KindInsufficientCapacity, Error: "no spot"})
	plan = h.Decide()
	if len(plan.Launches) != 1 || plan.Launches[0].CapacityType != api.CapacityOnDemand {
		t.Fatalf("on-demand fallback: %+v", plan.Launches)
	}
	if _, ok := plan.Memory.Unavailable[planner.OfferingKey("small", "a", api.CapacitySpot)]; !ok {
		t.Fatalf("miss not remembered: %v", plan.Memory.Unavailable)
	}
	if len(plan.Memory.Backoff) != 0 {
		t.Fatal("a capacity miss must not back the group off")
	}
	h.Step(h.Config.UnavailableTTL)
	if plan = h.Decide(); plan.Launches[0].CapacityType != api.CapacitySpot || len(plan.Memory.Unavailable) != 0 {
		t.Fatalf("the miss must be forgotten after the TTL: %+v %v", plan.Launches, plan.Memory.Unavailable)
	}
}

// An empty machine above minSize is drained once it was idle for
// EmptyMachineTTL, and terminated once drained; never below minSize. A
// quiet pass halfway through the TTL wakes the next at its end (the
// harness checks a pass it would skip decides nothing).
func TestIdleMachineIsRemovedAboveMinSize(t *testing.T) {
	h := decidetest.New(t)
	h.Config.ResyncInterval = time.Hour
	h.Cluster("c", decidetest.Group("g", "small", 1, 3))
	busy := h.Machine("c", "g", "small", young(h))
	idle := h.Machine("c", "g", "small")
	h.Service("web", "c", 1, "500m", "128Mi")
	h.Replica("web", 0, busy.ID)
	plan := h.Pass()
	if len(plan.Drains) != 0 || !plan.Memory.IdleSince[idle.ID].Equal(h.Now) {
		t.Fatalf("drained before the TTL, or idle time not kept: %+v %v", plan.Drains, plan.Memory.IdleSince)
	}
	h.Step(h.Config.Planner.EmptyMachineTTL / 2)
	h.Heartbeat()
	if plan = h.Pass(); !plan.Idle(h.Snap, h.Memory) || !plan.Wake.At.Equal(h.Now.Add(h.Config.Planner.EmptyMachineTTL/2)) {
		t.Fatalf("halfway through the TTL the pass decides nothing and wakes at its end: %s, wake %v", decidetest.Describe(plan), plan.Wake.At)
	}
	h.Step(h.Config.Planner.EmptyMachineTTL / 2)
	h.Heartbeat()
	plan = h.Pass()
	if len(plan.Drains) != 1 || plan.Drains[0].Machine != idle.ID {
		t.Fatalf("want %s drained: %+v", idle.ID, plan.Drains)
	}
	plan = h.Pass()
	if len(plan.Terminates) != 1 || plan.Terminates[0].Cause != decide.CauseDrained || len(plan.TerminateCalls) != 1 {
		t.Fatalf("a drained empty machine goes: %+v", plan.Terminates)
	}
	h.Step(h.Config.Planner.EmptyMachineTTL * 2)
	h.Heartbeat()
	if plan = h.Pass(); len(plan.Drains)+len(plan.Terminates) != 0 {
		t.Fatalf("went below minSize: %+v %+v", plan.Drains, plan.Terminates)
	}
}

// An idle machine that takes a replica is idle no more; emptied again,
// its idle time starts anew (it is not drained for the time it was idle
// before).
func TestIdleTimeStartsAnewOnceAMachineHadReplicas(t *testing.T) {
	h := decidetest.New(t)
	h.Config.ResyncInterval = time.Hour
	h.Cluster("c", decidetest.Group("g", "small", 0, 3))
	busy := h.Machine("c", "g", "small", young(h))
	idle := h.Machine("c", "g", "small", young(h))
	h.Service("web", "c", 1, "500m", "128Mi")
	h.Service("job", "c", 0, "500m", "128Mi")
	h.Replica("web", 0, busy.ID)
	first := h.Now
	if plan := h.Pass(); !plan.Memory.IdleSince[idle.ID].Equal(first) {
		t.Fatalf("idle since %v, want %v", plan.Memory.IdleSince, first)
	}
	h.Step(h.Config.Planner.EmptyMachineTTL / 2)
	h.Heartbeat()
	*h.ServiceByName("job").Spec.Replicas = 1
	h.Replica("job", 0, idle.ID)
	if plan := h.Pass(); !plan.Memory.IdleSince[idle.ID].IsZero() {
		t.Fatalf("a machine with a replica is still idle since %v", plan.Memory.IdleSince[idle.ID])
	}
	h.Step(h.Config.Planner.EmptyMachineTTL / 2)
	h.Heartbeat()
	*h.ServiceByName("job").Spec.Replicas = 0
	h.Snap.Replicas = slices.DeleteFunc(h.Snap.Replicas, func(r *api.Replica) bool { return r.Service == "job" })
	plan := h.Pass()
	if again := plan.Memory.IdleSince[idle.ID]; !again.Equal(h.Now) {
		t.Fatalf("emptied again, idle since %v, want %v (now)", again, h.Now)
	}
	if len(plan.Drains) != 0 {
		t.Fatalf("drained for the time it was idle before: %+v", plan.Drains)
	}
}

// stoppedIntoThePool is a cluster whose warm pool of one holds a
// stopped machine (returned): an idle machine, stopped into the pool
// once empty for the TTL, beside a busy one running web's one replica.
func stoppedIntoThePool(t *testing.T) (*decidetest.Harness, *api.Machine) {
	t.Helper()
	h := decidetest.New(t)
	g := decidetest.Group("g", "small", 0, 3)
	g.WarmPool, g.WarmPoolState = 1, api.WarmStopped
	h.Cluster("c", g)
	busy := h.Machine("c", "g", "small", young(h))
	idle := h.Machine("c", "g", "small")
	h.Service("web", "c", 1, "600m", "128Mi")
	h.Replica("web", 0, busy.ID)
	h.Pass()
	h.Step(h.Config.Planner.EmptyMachineTTL)
	h.Heartbeat()
	if plan := h.Pass(); len(plan.Stops) != 1 || plan.Stops[0].Machine != idle.ID {
		t.Fatalf("want the idle machine stopped into the pool: %+v", plan.Stops)
	}
	return h, idle
}

// The warm pool keeps an idle machine stopped, and starts it before
// launching anything.
func TestStoppedWarmPoolStartsBeforeLaunching(t *testing.T) {
	h, idle := stoppedIntoThePool(t)
	h.Service("web", "c", 2, "600m", "128Mi")
	plan := h.Pass()
	if len(plan.Starts) != 1 || plan.Starts[0].Machine != idle.ID || len(plan.Launches) != 0 {
		t.Fatalf("want the stopped machine started, nothing launched: starts %+v launches %+v", plan.Starts, plan.Launches)
	}
}

// A warm-pool machine started again is idle from its start: stopped
// long after it emptied, it kept that old idle time, so a pass stopped
// it again at once whenever what it was started for had not come to it
// yet (a consolidation's replacement started and stopped every pass).
func TestAStartedWarmMachineIsIdleFromItsStart(t *testing.T) {
	h, idle := stoppedIntoThePool(t)
	h.Step(h.Config.Planner.EmptyMachineTTL * 3)
	h.Heartbeat()
	h.Service("web", "c", 2, "600m", "128Mi")
	started := h.Now
	plan := h.Pass()
	if len(plan.Starts) != 1 || plan.Starts[0].Machine != idle.ID {
		t.Fatalf("want the stopped machine started: %+v", plan.Starts)
	}
	if since := plan.Memory.IdleSince[idle.ID]; !since.Equal(started) {
		t.Fatalf("started at %v, idle since %v", started, since)
	}
	h.Service("web", "c", 1, "600m", "128Mi") // what it was started for is gone before it came
	h.Snap.Replicas = slices.DeleteFunc(h.Snap.Replicas, func(r *api.Replica) bool { return r.ID == "web-1" })
	h.Step(time.Second)
	h.Heartbeat()
	if plan = h.Pass(); len(plan.Stops) != 0 {
		t.Fatalf("stopped a second after its start, for the time it was idle before: %+v", plan.Stops)
	}
	h.Step(h.Config.Planner.EmptyMachineTTL)
	h.Heartbeat()
	if plan = h.Pass(); len(plan.Stops) != 1 || plan.Stops[0].Machine != idle.ID {
		t.Fatalf("want it stopped again once idle for the TTL since its start: %+v", plan.Stops)
	}
}

// A warm-pool machine that would not start is replaced.
func TestWarmMachineThatWillNotStartIsReplaced(t *testing.T) {
	h := decidetest.New(t)
	h.Cluster("c", decidetest.Group("g", "small", 0, 3))
	m := h.Machine("c", "g", "small", func(m *api.Machine) { m.FleetState = api.FleetStopped })
	h.Outcome(decide.Outcome{Call: decide.CallStart, Machine: m.ID, Cluster: "c", Group: "g", Kind: provisioner.KindTransport, Error: "boom"})
	plan := h.Decide()
	if len(plan.Terminates) != 1 || plan.Terminates[0].Cause != decide.CauseStartFailed {
		t.Fatalf("%+v", plan.Terminates)
	}
}

// A teeRequired service that outgrows its TEE machine gets another: the
// group is known to offer a TEE runtime (defect: "prerequisite missing"
// and no machine).
func TestTEEGroupGrowsForTEERequired(t *testing.T) {
	h := decidetest.New(t)
	h.Cluster("c", decidetest.Group("g", "small", 1, 3))
	tee := h.Machine("c", "g", "small", func(m *api.Machine) { m.Runtimes = []string{"kata", "process"} })
	h.Service("vault", "c", 2, "600m", "128Mi", func(s *api.ServiceSpec) { s.Isolation = api.IsolationTEERequired })
	h.Replica("vault", 0, tee.ID)
	plan := h.Decide()
	if len(plan.Launches) != 1 {
		t.Fatalf("want a machine for vault-1 (pending: %q)", plan.Pending["vault-1"])
	}
	if strings.Contains(plan.Pending["vault-1"], "prerequisite missing") {
		t.Fatalf("reason %q", plan.Pending["vault-1"])
	}

	h = decidetest.New(t)
	h.Cluster("c", decidetest.Group("g", "small", 1, 3))
	h.Machine("c", "g", "small")
	h.Service("vault", "c", 1, "100m", "128Mi", func(s *api.ServiceSpec) { s.Isolation = api.IsolationTEERequired })
	plan = h.Decide()
	if len(plan.Launches) != 0 || !strings.Contains(plan.Pending["vault-0"], "prerequisite missing") {
		t.Fatalf("no TEE anywhere: launches %+v, reason %q", plan.Launches, plan.Pending["vault-0"])
	}
}

// A group removed from the spec has its machines drained.
func TestRemovedGroupIsDrained(t *testing.T) {
	h := decidetest.New(t)
	h.Cluster("c", decidetest.Group("g", "small", 1, 3))
	m := h.Machine("c", "other", "small")
	plan := h.Decide()
	if len(plan.Drains) != 1 || plan.Drains[0].Machine != m.ID || !strings.Contains(plan.Drains[0].Reason, "removed from the spec") {
		t.Fatalf("%+v", plan.Drains)
	}
}

// young makes a machine too young to consolidate for the whole test.
func young(h *decidetest.Harness) func(*api.Machine) {
	return func(m *api.Machine) { m.CreatedAt = h.Now.Add(time.Hour) }
}

func hasEvent(p decide.Plan, reason, text string) bool {
	for _, e := range p.Events {
		if e.Reason == reason && strings.Contains(e.Message, text) {
			return true
		}
	}
	return false
}

// A machine replaced by a cheaper one is replaced once: while the
// replacement boots, the passes that follow (the controller passes again
// at once after one that acted) launch no other. Found by gantry
// simulate, whose launches answer after a latency: each pass launched
// another replacement until the first one joined.
func TestAReplacementIsLaunchedOnce(t *testing.T) {
	h := webOnALargeMachine(t)
	plan := h.Pass()
	if len(plan.Launches) != 1 || plan.Launches[0].InstanceType != "small" {
		t.Fatalf("want the large machine replaced by a small one, launched %+v", plan.Launches)
	}
	for i := 0; i < 3; i++ {
		h.Step(time.Second)
		h.Heartbeat()
		if plan = h.Pass(); len(plan.Launches) != 0 {
			t.Fatalf("pass %d while the replacement boots launched %+v", i+2, plan.Launches)
		}
	}
	h.Join()
	plan = h.Settle(10)
	if len(h.Snap.Machines) != 1 || h.Snap.Machines[0].InstanceType != "small" {
		t.Fatalf("machines after the replacement: %+v", h.Snap.Machines)
	}
}

// A price that changes in the catalog in place (a spot price trace, a
// provider's catalog refreshed) is planned with at once, though nothing
// in the store changed: the passes before, which found nothing to do,
// are not taken again as they were.
func TestAPriceChangeInPlaceIsPlannedWith(t *testing.T) {
	h := webOnALargeMachine(t)
	setPrice := func(price float64) { setSmallOnDemandPrice(h, price) }
	setPrice(0.08) // as dear as large: nothing to save
	h.Settle(10)
	h.Step(time.Second)
	h.Pass() // reads the memory the first pass wrote
	h.Step(time.Second)
	if plan := h.Pass(); plan.Acts() || !plan.Booked.ReusedCapacity() {
		t.Fatalf("a pass with nothing changed: want the last plan taken again and nothing done, reused %v: %s", plan.Booked.ReusedCapacity(), decidetest.Describe(plan))
	}
	setPrice(0.02)
	h.Step(h.Config.ConsolidateInterval) // the next look for machines to replace
	// And the replica's status written again (its state the same): what
	// is in the store changed, but nothing scheduling or the planner
	// reads, so the pass runs, and only the price can tell it to plan anew.
	for i, r := range h.Snap.Replicas {
		rewritten := *r
		rewritten.UpdatedAt = h.Now
		h.Snap.Replicas[i] = &rewritten
	}
	plan := h.Pass()
	if len(plan.Launches) != 1 || plan.Launches[0].InstanceType != "small" {
		t.Fatalf("small became cheaper in the catalog: want large replaced by small, launched %+v", plan.Launches)
	}
}

// setSmallOnDemandPrice changes the price of the small type on demand
// in the harness's catalog, in place.
func setSmallOnDemandPrice(h *decidetest.Harness, price float64) {
	offerings := h.Snap.Catalogs["c"].Catalog[0].Offerings
	for i := range offerings {
		if offerings[i].CapacityType == api.CapacityOnDemand {
			offerings[i].PricePerHour = price
		}
	}
}

// webOnALargeMachine: a replica of 500m on a large machine of a group of
// any instance type, where a small one would hold it.
func webOnALargeMachine(t *testing.T) *decidetest.Harness {
	h := decidetest.New(t)
	h.Cluster("c", api.CapacityGroup{GroupID: "g", MinSize: 0, MaxSize: 5, CapacityType: api.CapacityOnDemand, WarmPoolState: api.WarmRunning})
	h.Service("web", "c", 1, "500m", "128Mi")
	m := h.Machine("c", "g", "large")
	h.Replica("web", 0, m.ID)
	return h
}

// Consolidation's moves end one by one, each in a pass: the new copy
// comes up, then the old one stops once drained. Neither changes what
// scheduling or the planner read (the old copies are on a draining
// machine, which neither sees), so the passes that follow take the last
// one's findings, the pass that stopped an old copy included, and the
// service's step keeps its tally of the replicas (a move ended leaves
// each available as it was); the harness checks each against a pass
// afresh.
func TestAMoveEndingTakesTheLastPlan(t *testing.T) {
	h := decidetest.New(t)
	h.Cluster("c", decidetest.Group("g", "large", 1, 3))
	old := h.Machine("c", "g", "large", func(m *api.Machine) { m.FleetState = api.FleetDraining })
	h.Machine("c", "g", "large")
	h.Service("web", "c", 2, "400m", "128Mi")
	h.Replica("web", 0, old.ID)
	h.Replica("web", 1, old.ID)
	if plan := h.Pass(); len(plan.Assignments) != 2 {
		t.Fatalf("want both replicas moving off the draining machine: %s", decidetest.Describe(plan))
	}
	h.Pass() // sees its moves
	h.Step(time.Second)
	h.Heartbeat()
	web0 := h.ReplicaByID("web-0")
	if _, err := replica.Observe(web0, api.ReplicaStatus{ReplicaID: web0.ID, State: api.ReplicaRunning, Health: api.HealthHealthy}, "", h.Now); err != nil {
		t.Fatal(err)
	}
	if plan := h.Pass(); plan.Acts() || !plan.Booked.ReusedCapacity() {
		t.Fatalf("web-0's new copy runs: want the last plan taken, nothing done; reused %v: %s", plan.Booked.ReusedCapacity(), decidetest.Describe(plan))
	}
	h.Step(api.UpdatePolicy{}.Drain())
	h.Heartbeat()
	plan := h.Pass()
	if !slices.Equal(plan.EndMoves, []string{"web-0"}) || len(plan.Terminates) != 0 {
		t.Fatalf("want web-0's old copy stopped once drained, and the machine kept for web-1's: %s", decidetest.Describe(plan))
	}
	if plan.Booked.KeptTallies() != 1 {
		t.Fatalf("web's step walked its replicas although the pass only ended web-0's move (%d tallies kept)", plan.Booked.KeptTallies())
	}
	if plan := h.Pass(); plan.Acts() || !plan.Booked.ReusedCapacity() {
		t.Fatalf("after the old copy stopped: want the plan of the pass that stopped it taken; reused %v: %s", plan.Booked.ReusedCapacity(), decidetest.Describe(plan))
	}
}

// A price changed in place, and nothing else, is seen: a server gets a
// new catalog when its provider's refreshes, and so the harness keeps a
// copy of the catalogs it saw, not the same ones (else it would take the
// pass after for one the controller skips, and fail it for acting).
func TestAPriceChangeAloneWakesThePass(t *testing.T) {
	h := webOnALargeMachine(t)
	setSmallOnDemandPrice(h, 0.08) // as dear as large: nothing to save
	h.Settle(10)
	h.Step(time.Second)
	h.Pass()
	setSmallOnDemandPrice(h, 0.02)
	h.Step(h.Config.ConsolidateInterval) // the next look for machines to replace
	if plan := h.Pass(); len(plan.Launches) != 1 || plan.Launches[0].InstanceType != "small" {
		t.Fatalf("small became cheaper: want large replaced by small, launched %+v", plan.Launches)
	}
}

// Consolidation looks at most every ConsolidateInterval after a look
// that found nothing: a pass soon after leaves it out and wakes when the
// next is due, and that pass finds what changed meanwhile (Karpenter's
// disruption loop and the Cluster Autoscaler's scan look every ten
// seconds). A look that removes a machine leaves no wait: a shrinking
// fleet is not held to max-removals an interval.
func TestConsolidationLooksAtMostEveryInterval(t *testing.T) {
	h := webOnALargeMachine(t)
	setSmallOnDemandPrice(h, 0.08) // as dear as large: nothing to save
	h.Settle(10)
	h.Step(h.Config.ConsolidateInterval)
	h.Heartbeat()
	looked := h.Now
	if plan := h.Pass(); !plan.ConsolidatedAt.Equal(looked) {
		t.Fatalf("the pass after the interval looks: consolidated at %s, want %s", plan.ConsolidatedAt, looked)
	}
	setSmallOnDemandPrice(h, 0.02)
	h.Step(time.Second)
	h.Heartbeat()
	plan := h.Pass()
	due := looked.Add(h.Config.ConsolidateInterval)
	if len(plan.Launches) != 0 || !plan.ConsolidatedAt.Equal(looked) || !plan.Wake.At.Equal(due) {
		t.Fatalf("a second after the last look: want nothing replaced yet, consolidated at %s, a wake at %s; got %s, consolidated at %s, wake %s",
			looked, due, decidetest.Describe(plan), plan.ConsolidatedAt, plan.Wake.At)
	}
	h.Step(due.Sub(h.Now))
	h.Heartbeat()
	plan = h.Pass()
	if len(plan.Launches) != 1 || plan.Launches[0].InstanceType != "small" || !plan.ConsolidatedAt.IsZero() {
		t.Fatalf("the next look: want large replaced by small, and no wait before the next look (it removed one), launched %+v, consolidated at %s",
			plan.Launches, plan.ConsolidatedAt)
	}
}

// A pass whose only write is a waiting replica's changed reason is not
// idle (the controller would skip the passes after it as if nothing had
// been done), and names that reason alone to write; a pass that tells
// the replicas what they say already is idle.
func TestAChangedReasonAloneIsNotIdle(t *testing.T) {
	h := decidetest.New(t)
	h.Cluster("c", decidetest.Group("g", "small", 0, 3))
	h.Service("huge", "c", 2, "3", "128Mi") // no type holds it: it waits, and nothing is launched
	h.Pass()
	h.Step(time.Second)
	before := h.Memory
	if plan := h.Decide(); !plan.Idle(h.Snap, before) || len(plan.Pending) != 2 || len(plan.PendingChanged) != 0 {
		t.Fatalf("a pass telling the replicas what they say: want idle, 2 pending, none to write; idle %v, pending %v, to write %v",
			plan.Idle(h.Snap, before), plan.Pending, plan.PendingChanged)
	}
	stale := h.ReplicaByID("huge-1")
	stale.Reason = "an older reason"
	h.Step(time.Second)
	before = h.Memory
	plan := h.Decide()
	if plan.Acts() || plan.Idle(h.Snap, before) || !slices.Equal(plan.PendingChanged, []string{"huge-1"}) {
		t.Fatalf("a pass correcting one reason: want it alone to write and the plan not idle; acts %v, idle %v, to write %v",
			plan.Acts(), plan.Idle(h.Snap, before), plan.PendingChanged)
	}
}

// A replacement is planned to save: a stopped machine of the group that
// is of another type (or dearer) does not serve it, else the dear
// machine would be replaced by one as dear, and again. A stopped machine
// of its type does. A machine for pending replicas takes any that holds one of them.
func TestAReplacementStartsOnlyAStoppedMachineOfItsType(t *testing.T) {
	for _, tc := range []struct {
		stoppedType string
		wantStart   bool
	}{{"large", false}, {"small", true}} {
		h := webOnALargeMachine(t)
		stopped := h.Machine("c", "g", tc.stoppedType, func(m *api.Machine) { m.FleetState = api.FleetStopped })
		plan := h.Pass()
		started := len(plan.Starts) == 1 && plan.Starts[0].Machine == stopped.ID
		launchedSmall := len(plan.Launches) == 1 && plan.Launches[0].InstanceType == "small"
		if started != tc.wantStart || launchedSmall == tc.wantStart || len(plan.Starts)+len(plan.Launches) != 1 {
			t.Fatalf("a stopped %s machine beside a replacement by a small one: want started %v, got starts %+v launches %+v",
				tc.stoppedType, tc.wantStart, plan.Starts, plan.Launches)
		}
	}
	h := webOnALargeMachine(t)
	stopped := h.Machine("c", "g", "large", func(m *api.Machine) { m.FleetState = api.FleetStopped })
	h.Service("web", "c", 40, "500m", "128Mi") // more than the large machine holds
	if plan := h.Pass(); !slices.ContainsFunc(plan.Starts, func(s decide.MachineStep) bool { return s.Machine == stopped.ID }) {
		t.Fatalf("pending replicas: want the stopped large machine started, got starts %+v launches %+v", plan.Starts, plan.Launches)
	}
}

// A replaced machine is drained once its replacement has joined, also
// while the cluster grows (when consolidation waits, so it did not move
// the replicas, and the replacement sat empty until its TTL removed it,
// and the machine was replaced again: found by gantry simulate in a
// world of spot interruptions, every few minutes for hours).
func TestAReplacedMachineIsDrainedOnceItsReplacementJoins(t *testing.T) {
	h := webOnALargeMachine(t)
	large := h.Snap.Machines[0]
	plan := h.Pass()
	if len(plan.Launches) != 1 || plan.Launches[0].InstanceType != "small" || plan.Launches[0].Replaces != large.ID {
		t.Fatalf("want a small machine launched to replace %s: %+v", large.ID, plan.Launches)
	}
	h.Service("stuck", "c", 1, "64", "128Mi") // no type holds it: the cluster waits to grow
	h.Join()
	h.Step(time.Second)
	h.Heartbeat()
	plan = h.Pass()
	if len(plan.Drains) != 1 || plan.Drains[0].Machine != large.ID {
		t.Fatalf("the replacement joined: want %s drained, got drains %+v", large.ID, plan.Drains)
	}
	h.Settle(10)
	for _, m := range h.Snap.Machines {
		if m.InstanceType != "small" {
			t.Fatalf("machines after the replacement: %+v", h.Snap.Machines)
		}
	}
	if web := h.ReplicaByID("web-0"); web == nil || web.State != api.ReplicaRunning {
		t.Fatalf("web-0 after the replacement: %+v", web)
	}
}

// A stopped warm-pool machine is started for waiting replicas only when
// it can hold one of them: a small one started for a replica that needs
// a large machine served nothing, and the replica waited for the large
// machine launched at the next pass all the same, beside a machine
// running idle. A stopped machine that holds one is started, the large
// one launched for the rest.
func TestAStoppedMachineStartsOnlyForReplicasItHolds(t *testing.T) {
	h := webOnALargeMachine(t)
	small := h.Machine("c", "g", "small", func(m *api.Machine) { m.FleetState = api.FleetStopped })
	h.Service("big", "c", 2, "3", "128Mi") // one beside web on the large machine, one on a new one
	plan := h.Pass()
	if len(plan.Starts) != 0 || len(plan.Launches) != 1 || plan.Launches[0].InstanceType != "large" {
		t.Fatalf("a replica only a large machine holds: want a large one launched, the stopped small one left; starts %+v launches %+v",
			plan.Starts, plan.Launches)
	}
	h = webOnALargeMachine(t)
	small = h.Machine("c", "g", "small", func(m *api.Machine) { m.FleetState = api.FleetStopped })
	h.Service("web", "c", 9, "500m", "128Mi") // 8 more: the large machine holds 7 of them
	if plan := h.Pass(); !slices.ContainsFunc(plan.Starts, func(s decide.MachineStep) bool { return s.Machine == small.ID }) {
		t.Fatalf("replicas a small machine holds: want the stopped small one started, got starts %+v launches %+v", plan.Starts, plan.Launches)
	}
}
