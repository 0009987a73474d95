package decide_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/decide"
	"github.com/gantry-dev/gantry/decide/decidetest"
	"github.com/gantry-dev/gantry/fleet"
	"github.com/gantry-dev/gantry/provisioner"
)

// A machine that stops heartbeating is marked unreachable (and replaced
// at once); after the reschedule grace it is terminated and its replicas
// are placed elsewhere. One that comes back in time keeps them.
func TestLostMachineIsReplacedAndItsReplicasMove(t *testing.T) {
	h := decidetest.New(t)
	h.Cluster("c", decidetest.Group("g", "small", 2, 3))
	lost := h.Machine("c", "g", "small")
	other := h.Machine("c", "g", "small")
	h.Service("web", "c", 2, "400m", "128Mi")
	h.Replica("web", 0, lost.ID)
	h.Replica("web", 1, other.ID)
	limit := h.Config.HeartbeatInterval * time.Duration(h.Config.MissedHeartbeats)
	h.Step(limit + time.Second)
	fresh := h.Now
	other.LastHeartbeat = &fresh
	plan := h.Pass()
	if len(plan.Unreachable) != 1 || plan.Unreachable[0].Machine != lost.ID || !strings.Contains(plan.Unreachable[0].Reason, "no heartbeat for") {
		t.Fatalf("unreachable: %+v", plan.Unreachable)
	}
	if len(plan.Launches) != 1 {
		t.Fatalf("the lost machine is replaced at once: %+v", plan.Launches)
	}
	if len(plan.Terminates) != 0 || h.ReplicaByID("web-0").Machine != lost.ID {
		t.Fatal("replicas moved before the grace")
	}
	h.Step(h.Config.RescheduleGrace)
	other.LastHeartbeat = &h.Now
	plan = h.Pass()
	if len(plan.Terminates) != 1 || plan.Terminates[0].Cause != decide.CauseUnreachable {
		t.Fatalf("terminate after the grace: %+v", plan.Terminates)
	}
	if r := h.ReplicaByID("web-0"); r.Machine == lost.ID {
		t.Fatalf("web-0 still on the lost machine: %+v", r)
	}
}

// Heartbeats a server's view records beside the machines
// (Snapshot.Heartbeats, aligned with them) count as the machines' own: a
// machine whose only recent heartbeat is there is not marked
// unreachable, a silent one is, and a recorded heartbeat older than a
// machine's own does not make it silent.
func TestHeartbeatsBesideTheMachinesCount(t *testing.T) {
	h := decidetest.New(t)
	h.Cluster("c", decidetest.Group("g", "small", 3, 4))
	lost := h.Machine("c", "g", "small")
	beside := h.Machine("c", "g", "small")
	own := h.Machine("c", "g", "small")
	limit := h.Config.HeartbeatInterval * time.Duration(h.Config.MissedHeartbeats)
	h.Step(limit + time.Second)
	own.LastHeartbeat = &h.Now
	h.Snap.Heartbeats = make([]int64, len(h.Snap.Machines))
	for i, m := range h.Snap.Machines {
		switch m {
		case beside:
			h.Snap.Heartbeats[i] = h.Now.UnixNano()
		case own:
			h.Snap.Heartbeats[i] = h.Now.Add(-2 * limit).UnixNano()
		}
	}
	plan := h.Pass()
	if len(plan.Unreachable) != 1 || plan.Unreachable[0].Machine != lost.ID {
		t.Fatalf("unreachable: %+v, want %s alone", plan.Unreachable, lost.ID)
	}
}

// A server that just started (or whose store failed) has heard no
// heartbeat for a while through no fault of the machines: silence before
// LivenessSince does not count (defect: every machine declared
// unreachable after a store outage).
func TestSilenceBeforeLivenessSinceDoesNotCount(t *testing.T) {
	h := decidetest.New(t)
	h.Cluster("c", decidetest.Group("g", "small", 1, 3))
	h.Machine("c", "g", "small")
	h.Step(10 * time.Minute) // no heartbeat recorded: the store was failing
	h.Snap.LivenessSince = h.Now
	if plan := h.Decide(); len(plan.Unreachable) != 0 {
		t.Fatalf("a store outage made machines unreachable: %+v", plan.Unreachable)
	}
	limit := h.Config.HeartbeatInterval * time.Duration(h.Config.MissedHeartbeats)
	h.Step(limit + time.Second)
	if plan := h.Decide(); len(plan.Unreachable) != 1 {
		t.Fatal("a machine still silent a full period after the outage must be unreachable")
	}
}

// A drained machine's replicas move new copy first: the old copy stays
// until the new one runs; the machine goes once it holds nothing.
func TestDrainMovesNewCopyFirst(t *testing.T) {
	h := decidetest.New(t)
	h.Cluster("c", decidetest.Group("g", "small", 1, 3))
	old := h.Machine("c", "g", "small", func(m *api.Machine) { m.FleetState = api.FleetDraining })
	spare := h.Machine("c", "g", "small")
	h.Service("web", "c", 1, "400m", "128Mi")
	h.Replica("web", 0, old.ID)
	plan := h.Pass()
	if len(plan.Assignments) != 1 || !plan.Assignments[0].Moving() || plan.Assignments[0].Placement.Machine != spare.ID {
		t.Fatalf("want a move to %s: %+v", spare.ID, plan.Assignments)
	}
	if r := h.ReplicaByID("web-0"); r.PreviousMachine != old.ID {
		t.Fatalf("the old copy must keep running: %+v", r)
	}
	if plan = h.Pass(); len(plan.Terminates) != 0 {
		t.Fatal("terminated while the old copy still runs")
	}
	h.Run()
	// The new copy runs: the old one leaves the endpoints and drains
	// (drainSeconds) before it stops and the machine goes.
	if plan = h.Pass(); len(plan.Terminates) != 0 || len(plan.EndMoves) != 0 {
		t.Fatalf("the old copy stopped before it drained: %+v %+v", plan.EndMoves, plan.Terminates)
	}
	h.Step(api.UpdatePolicy{}.Drain())
	plan = h.Pass()
	if len(plan.EndMoves) != 1 || plan.EndMoves[0] != "web-0" {
		t.Fatalf("want web-0's old copy stopped once drained: %+v", plan.EndMoves)
	}
	if len(plan.Terminates) == 0 {
		plan = h.Pass()
	}
	if len(plan.Terminates) != 1 || plan.Terminates[0].Machine != old.ID {
		t.Fatalf("want the drained machine terminated: %+v", plan.Terminates)
	}
}

// A drain that cannot finish is cut at its deadline.
func TestDrainDeadline(t *testing.T) {
	h := decidetest.New(t)
	h.Cluster("c", decidetest.Group("g", "small", 0, 1))
	deadline := h.Now.Add(time.Minute)
	m := h.Machine("c", "g", "small", func(m *api.Machine) { m.FleetState, m.DrainDeadline = api.FleetDraining, &deadline })
	h.Service("web", "c", 1, "400m", "128Mi")
	h.Replica("web", 0, m.ID)
	if plan := h.Decide(); len(plan.Terminates) != 0 {
		t.Fatal("terminated before the deadline")
	}
	h.Step(2 * time.Minute)
	h.Heartbeat()
	if plan := h.Decide(); len(plan.Terminates) != 1 || !strings.Contains(plan.Terminates[0].Reason, "deadline passed with 1 replica(s) still on it") {
		t.Fatalf("%+v", plan.Terminates)
	}
}

// Launch intents: one whose call is not running is sent (again, after a
// restart), one in flight is not; a machine that does not join in time is
// replaced with its console read; one whose instance vanished or never
// runs, too.
func TestLaunchesAreFollowed(t *testing.T) {
	h := decidetest.New(t)
	h.Cluster("c", decidetest.Group("g", "small", 0, 5))
	intent := h.Machine("c", "g", "small", launching(h, ""))
	inFlight := h.Machine("c", "g", "small", launching(h, ""))
	h.Snap.InFlight[decide.CallKey(decide.CallLaunch, inFlight.ID)] = true
	slow := h.Machine("c", "g", "small", launching(h, "i-slow"))
	gone := h.Machine("c", "g", "small", launching(h, "i-gone"))
	h.Snap.Instances[gone.ID] = decide.InstanceObservation{Found: false, At: h.Now}
	plan := h.Decide()
	if len(plan.LaunchCalls) != 1 || plan.LaunchCalls[0] != intent.ID {
		t.Fatalf("launch calls %v, want only %s", plan.LaunchCalls, intent.ID)
	}
	if !slices.Contains(plan.Describes, slow.ID) {
		t.Fatalf("want %s described: %v", slow.ID, plan.Describes)
	}
	if term := terminated(plan, gone.ID); term == nil || term.Cause != decide.CauseVanished {
		t.Fatalf("vanished: %+v", plan.Terminates)
	}
	h.Step(h.Config.LaunchTimeout + time.Second)
	h.Snap.Instances[slow.ID] = decide.InstanceObservation{Found: true, State: provisioner.StatePending, At: h.Now}
	plan = h.Decide()
	if term := terminated(plan, slow.ID); term == nil || term.Cause != decide.CauseLaunchTimeout {
		t.Fatalf("launch timeout: %+v", plan.Terminates)
	}
	h.Snap.Instances[slow.ID] = decide.InstanceObservation{Found: true, State: provisioner.StateRunning, At: h.Now}
	h.Step(h.Config.JoinTimeout)
	plan = h.Decide()
	if term := terminated(plan, slow.ID); term == nil || term.Cause != decide.CauseJoinTimeout || !term.Diagnose {
		t.Fatalf("join timeout with diagnosis: %+v", plan.Terminates)
	}
}

// A booting machine is described again after DescribeInterval at first,
// then after as long as its instance has been known, at most
// MaxDescribeInterval: a few looks while its agent takes a minute to
// join, not one every few seconds; the pass wakes for each.
func TestDescribesBackOffWhileAMachineBoots(t *testing.T) {
	h := decidetest.New(t)
	h.Cluster("c", decidetest.Group("g", "small", 0, 1))
	known := h.Now
	m := h.Machine("c", "g", "small", launching(h, "i-boot"), func(m *api.Machine) { m.InstanceKnownAt = &known })
	var looks []time.Duration
	for h.Now.Sub(known) <= 2*time.Minute {
		plan := h.Decide()
		if slices.Contains(plan.Describes, m.ID) {
			looks = append(looks, h.Now.Sub(known))
			h.Snap.Instances[m.ID] = decide.InstanceObservation{Found: true, State: provisioner.StateRunning, At: h.Now}
			continue
		}
		if plan.Wake.At.IsZero() {
			t.Fatalf("at %s: no describe and no wake", h.Now.Sub(known))
		}
		h.Now = plan.Wake.At
	}
	want := []time.Duration{0, 5 * time.Second, 10 * time.Second, 20 * time.Second, 40 * time.Second, 70 * time.Second, 100 * time.Second}
	if !slices.Equal(looks, want) {
		t.Fatalf("described at %v after the instance was known, want %v", looks, want)
	}
}

// A terminating machine's instance is terminated; a failed call is
// retried with backoff, and reported once when it takes too long.
func TestTerminationsAreRetriedAndReported(t *testing.T) {
	h := decidetest.New(t)
	h.Config.TerminateBackoff = 10 * time.Second
	h.Cluster("c", decidetest.Group("g", "small", 0, 3))
	m := h.Machine("c", "g", "small", func(m *api.Machine) { m.FleetState = api.FleetTerminating })
	if plan := h.Decide(); !slices.Contains(plan.TerminateCalls, m.ID) {
		t.Fatalf("terminate calls %v", plan.TerminateCalls)
	}
	h.Step(h.Config.StuckAfter)
	h.Outcome(decide.Outcome{Call: decide.CallTerminate, Machine: m.ID, Kind: provisioner.KindTransport, Error: "timeout"})
	plan := h.Decide()
	if slices.Contains(plan.TerminateCalls, m.ID) || !hasEvent(plan, "TerminateStuck", "still terminating") {
		t.Fatalf("after a failure: calls %v events %+v", plan.TerminateCalls, plan.Events)
	}
	h.Step(11 * time.Second)
	h.Outcome(decide.Outcome{Call: decide.CallTerminate, Machine: m.ID, Kind: provisioner.KindTransport, Error: "timeout"})
	plan = h.Decide()
	if r := plan.Memory.Terminations[m.ID]; r.Attempts != 2 || !r.Next.Equal(h.Now.Add(20*time.Second)) || hasEvent(plan, "TerminateStuck", "") {
		t.Fatalf("second failure: %+v (reported once only)", r)
	}
}

// Recovery compares a fresh inventory with the store: an intent whose
// instance exists adopts it, a machine whose instance is gone is
// terminated, an instance no machine owns is terminated once older than
// OrphanGrace. Hand-joined machines are nobody's to list.
func TestRecoveryAdoptsCleansAndTerminatesOrphans(t *testing.T) {
	h := decidetest.New(t)
	h.Cluster("c", decidetest.Group("g", "small", 0, 5))
	intent := h.Machine("c", "g", "small", launching(h, ""))
	vanished := h.Machine("c", "g", "small")
	kept := h.Machine("c", "g", "small")
	h.Machine("c", "g", "small", func(m *api.Machine) {
		m.Provider, m.ProviderKey, m.ProviderID = decidetest.External, decidetest.External, ""
	})
	tags := func(machine string) map[string]string { return map[string]string{provisioner.TagMachine: machine} }
	h.Step(time.Minute)
	h.Heartbeat()
	h.Snap.Inventories[decidetest.Provider] = decide.Inventory{At: h.Now, Instances: []provisioner.Instance{
		{ID: "i-found", Tags: tags(intent.ID), LaunchedAt: h.Now},
		{ID: kept.ProviderID, Tags: tags(kept.ID), LaunchedAt: h.Now.Add(-time.Hour)},
		{ID: "i-old-orphan", Tags: tags("c-g-gone"), LaunchedAt: h.Now.Add(-time.Hour)},
		{ID: "i-new-orphan", Tags: tags("c-g-new"), LaunchedAt: h.Now},
	}}
	plan := h.Decide()
	if len(plan.Adoptions) != 1 || plan.Adoptions[0].Machine != intent.ID || plan.Adoptions[0].Instance.ID != "i-found" {
		t.Fatalf("adoptions %+v", plan.Adoptions)
	}
	if term := terminated(plan, vanished.ID); term == nil || term.Cause != decide.CauseVanished {
		t.Fatalf("vanished: %+v", plan.Terminates)
	}
	if len(plan.Orphans) != 1 || plan.Orphans[0].Instance.ID != "i-old-orphan" {
		t.Fatalf("orphans %+v (only the old one)", plan.Orphans)
	}
	if slices.Contains(plan.Lists, decidetest.External) {
		t.Fatal("the external provider is listed")
	}
	if plan = h.Decide(); len(plan.Adoptions)+len(plan.Orphans) != 0 {
		t.Fatal("an inventory is judged by one pass only")
	}
}

// Each provider in use is listed when this leader has not listed it, and
// again every ResyncInterval.
func TestProvidersAreListed(t *testing.T) {
	h := decidetest.New(t)
	h.Cluster("c", decidetest.Group("g", "small", 0, 5))
	delete(h.Snap.ListedAt, decidetest.Provider)
	if plan := h.Decide(); !slices.Contains(plan.Lists, decidetest.Provider) {
		t.Fatalf("lists %v", plan.Lists)
	}
	h.Snap.ListedAt[decidetest.Provider] = h.Now
	if plan := h.Decide(); len(plan.Lists) != 0 {
		t.Fatalf("listed again at once: %v", plan.Lists)
	}
	h.Step(h.Config.ResyncInterval)
	if plan := h.Decide(); !slices.Contains(plan.Lists, decidetest.Provider) {
		t.Fatal("no resync")
	}
}

// launching makes a machine a launch intent (providerID empty) or a
// booting instance.
func launching(h *decidetest.Harness, providerID string) func(*api.Machine) {
	return func(m *api.Machine) {
		m.ProviderID, m.JoinedAt, m.LastHeartbeat, m.CreatedAt, m.Runtimes = providerID, nil, nil, h.Now, nil
		m.JoinState = api.JoinBooting
		if providerID == "" {
			m.JoinState = api.JoinProvisioning
		}
	}
}

func terminated(p decide.Plan, id string) *decide.Terminate {
	for i := range p.Terminates {
		if p.Terminates[i].Machine == id {
			return &p.Terminates[i]
		}
	}
	return nil
}

// A fresh leader lists its provider in the same pass that records its
// first launch intents: the list may finish before the launches are
// answered, and must not then judge the instances they made as gone
// (every fresh `gantry dev` launched, killed and relaunched its machines).
func TestAListOlderThanALaunchAnswerDoesNotJudgeIt(t *testing.T) {
	h := decidetest.New(t)
	h.Cluster("c", decidetest.Group("g", "small", 0, 5))
	m := h.Machine("c", "g", "small", launching(h, ""))
	listBegan := h.Now.Add(time.Millisecond)
	answered := h.Now.Add(2 * time.Millisecond)
	if err := fleet.Launched(m, provisioner.Instance{ID: "i-new"}, answered); err != nil {
		t.Fatal(err)
	}
	h.Step(3 * time.Millisecond)
	h.Snap.Inventories[decidetest.Provider] = decide.Inventory{At: listBegan}
	if plan := h.Decide(); terminated(plan, m.ID) != nil {
		t.Fatalf("a list begun before the launch was answered terminated its instance: %+v", plan.Terminates)
	}
	h.Step(time.Second)
	h.Snap.Inventories[decidetest.Provider] = decide.Inventory{At: h.Now}
	if term := terminated(h.Decide(), m.ID); term == nil || term.Cause != decide.CauseVanished {
		t.Fatal("a list begun after the answer that lacks the instance must find it vanished")
	}
}

// In an overlay cluster a machine takes replicas only once it is in the
// mesh: not before it reports NetworkReady, nor while that is False.
func TestOverlayMachinesTakeReplicasOnceInTheMesh(t *testing.T) {
	h := decidetest.New(t)
	h.Cluster("c", decidetest.Group("g", "small", 1, 1))
	h.Snap.Clusters["c"].Spec.Network = &api.NetworkSpec{Mode: api.NetworkOverlay}
	m := h.Machine("c", "g", "small")
	h.Service("web", "c", 1, "100m", "64Mi")
	for _, status := range []string{"", "False"} {
		m.Conditions = nil
		if status != "" {
			m.Conditions = []api.Condition{{Type: api.ConditionNetworkReady, Status: status, Reason: "OverlayFailed"}}
		}
		plan := h.Pass()
		if len(plan.Assignments) != 0 {
			t.Fatalf("NetworkReady %q: placed %+v, want nothing on a machine outside the mesh", status, plan.Assignments)
		}
		if why, told := plan.Pending["web-0"]; told && !strings.Contains(why, "network") {
			t.Fatalf("NetworkReady %q: web-0 waits because %q, which does not say a joined machine can be out of the network", status, why)
		}
		if status == "" && plan.Pending["web-0"] == "" {
			t.Fatalf("web-0 is not told why it waits: %+v", plan.Pending)
		}
	}
	m.Conditions = []api.Condition{{Type: api.ConditionNetworkReady, Status: "True"}}
	if plan := h.Pass(); len(plan.Assignments) != 1 || plan.Assignments[0].Placement.Machine != m.ID {
		t.Fatalf("in the mesh: %+v, want web-0 placed on %s", plan.Assignments, m.ID)
	}
}

// A pass finds what a draining machine holds among the replicas the
// snapshot lists for it (Snapshot.Draining, kept by a server's view), not
// by a walk of every replica: trusting a list that leaves its replica
// out, it finds the machine drained. Without the list it walks.
func TestDrainingMachinesAreLookedAtThroughTheirLists(t *testing.T) {
	h := decidetest.New(t)
	h.Cluster("c", decidetest.Group("g", "small", 0, 1))
	m := h.Machine("c", "g", "small", func(m *api.Machine) { m.FleetState = api.FleetDraining })
	h.Service("web", "c", 1, "400m", "128Mi")
	h.Replica("web", 0, m.ID)
	if plan := h.Decide(); len(plan.Terminates) != 0 {
		t.Fatalf("terminated while it holds web-0: %+v", plan.Terminates)
	}
	if got := h.Snap.Draining[m.ID]; !slices.Equal(got, []string{"web-0"}) {
		t.Fatalf("the harness lists %v on the draining machine, want web-0", got)
	}
	for _, c := range []struct {
		listed    map[string][]string
		terminate bool
	}{{map[string][]string{m.ID: {}}, true}, {nil, false}, {map[string][]string{}, false}} {
		snap := *h.Snap
		snap.Draining, snap.Booked, snap.Changed = c.listed, nil, nil // a booking is one pass's
		plan := decide.Decide(h.Config, &snap, h.Memory, h.Now)
		if term := terminated(plan, m.ID); (term != nil) != c.terminate {
			t.Errorf("listed %v: terminated %+v, want a termination %v", c.listed, term, c.terminate)
		}
	}
}

// A keeper of heartbeats that vouches for all but a few (HeardFrom)
// spares the pass a read of every heartbeat: the pass still finds the
// silent machine among the few, and still watches a machine marked
// unreachable whose heartbeat came back, though the keeper does not name
// it (the harness decides each pass without the vouch too, and fails on
// any difference).
func TestAVouchForHeartbeatsStillFindsTheSilentAndTheReturned(t *testing.T) {
	h := decidetest.New(t)
	h.Config.ResyncInterval = time.Hour
	h.Config.ConsolidateInterval = 0 // no look for machines to remove to wake it sooner
	h.Cluster("c", decidetest.Group("g", "small", 4, 5))
	lost := h.Machine("c", "g", "small")
	back := h.Machine("c", "g", "small")
	h.Machine("c", "g", "small")
	h.Machine("c", "g", "small")
	limit := h.Config.HeartbeatInterval * time.Duration(h.Config.MissedHeartbeats)
	beat := func() {
		for _, m := range h.Snap.Machines {
			if m != lost {
				at := h.Now
				m.LastHeartbeat = &at
			}
		}
	}
	beat()
	h.Pass()
	h.Step(limit / 2)
	since := h.Now.Add(-limit)
	back.UnreachableSince = &since // marked, and beating again since
	beat()
	plan := h.Pass()
	if h.Snap.HeardFrom == nil || len(h.Snap.HeardFrom.Except) != 1 || !h.Snap.HeardFrom.Except[lost.ID] {
		t.Fatalf("the harness vouches for every machine but %s: %+v", lost.ID, h.Snap.HeardFrom)
	}
	if want := back.LastHeartbeat.Add(limit + time.Nanosecond); !plan.Wake.At.Equal(want) {
		t.Fatalf("the pass wakes at %s, want %s: when the returned machine's beat runs out", plan.Wake.At, want)
	}
	h.Step(limit/2 + time.Second)
	beat()
	plan = h.Pass()
	if len(plan.Unreachable) != 1 || plan.Unreachable[0].Machine != lost.ID {
		t.Fatalf("unreachable: %+v, want %s alone", plan.Unreachable, lost.ID)
	}
}

// A pass that only ends a move (the old copy drained) takes the last
// pass's scheduling and plan: neither reads the old copy. Not when the
// machine the copy moved to drains since: once its move ends, the copy
// needs a move of its own. (The harness decides each pass afresh too.)
func TestEndingAMoveKeepsTheLastSchedulingUnlessTheNewMachineDrains(t *testing.T) {
	for _, drainsSince := range []bool{false, true} {
		t.Run(fmt.Sprintf("new machine drains since: %v", drainsSince), func(t *testing.T) {
			h := decidetest.New(t)
			h.Config.ResyncInterval = time.Hour
			h.Cluster("c", decidetest.Group("g", "large", 1, 4))
			old := h.Machine("c", "g", "large", func(m *api.Machine) { m.FleetState = api.FleetDraining })
			to := h.Machine("c", "g", "large")
			short, long := 5, 120
			h.Service("web", "c", 1, "400m", "128Mi", func(s *api.ServiceSpec) { s.Update.DrainSeconds = &short })
			h.Service("api", "c", 1, "400m", "128Mi", func(s *api.ServiceSpec) { s.Update.DrainSeconds = &long })
			h.Replica("web", 0, old.ID)
			h.Replica("api", 0, old.ID)
			h.Pass() // both move to the other machine
			h.Run()
			for range 3 { // the new copies run, the old ones are handed over
				h.Heartbeat()
				h.Pass()
			}
			if drainsSince {
				c := *to
				if _, err := fleet.Drain(&c, "operator", h.Now.Add(time.Hour), h.Now); err != nil {
					t.Fatal(err)
				}
				*to = c
				h.Heartbeat()
				h.Pass()
			}
			h.Step(time.Duration(short)*time.Second + time.Second)
			h.Heartbeat()
			plan := h.Pass()
			if !slices.Equal(plan.EndMoves, []string{"web-0"}) || len(plan.Terminates) != 0 {
				t.Fatalf("want web-0's move ended alone, the machine kept for api-0's: ends %v, terminates %+v", plan.EndMoves, plan.Terminates)
			}
			if reused := plan.Booked.ReusedCapacity(); reused == drainsSince {
				t.Fatalf("the pass took the last scheduling and plan: %v, want %v", reused, !drainsSince)
			}
		})
	}
}

// A machine that changed in nothing scheduling or the planner reads (an
// address; a terminated machine the store forgets) leaves the last pass's
// scheduling and plan to the next pass; one that grew does not: the
// replica that waited fits on it now. (The harness decides each pass
// afresh too.)
func TestAMachineChangeSchedulingDoesNotReadKeepsItsFindings(t *testing.T) {
	h := decidetest.New(t)
	h.Config.ResyncInterval = time.Hour
	h.Cluster("c", decidetest.Group("g", "small", 1, 1))
	a := h.Machine("c", "g", "small")
	gone := h.Machine("c", "g", "small", func(m *api.Machine) { m.FleetState = api.FleetTerminating })
	h.Service("web", "c", 1, "400m", "128Mi")
	h.Service("big", "c", 1, "3", "128Mi") // fits no machine the group may have: it waits
	h.Replica("web", 0, a.ID)
	if h.Snap.InFlight == nil {
		h.Snap.InFlight = map[string]bool{}
	}
	h.Snap.InFlight[decide.CallKey(decide.CallTerminate, gone.ID)] = true // its instance goes when the test says
	var plan decide.Plan
	for range 4 {
		h.Heartbeat()
		plan = h.Pass()
	}
	if plan.Acts() || len(plan.Pending) != 1 {
		t.Fatalf("want a quiet pass with big-0 waiting: %s, pending %v", decidetest.Describe(plan), plan.Pending)
	}
	for _, step := range []struct {
		what   string
		change func()
		reused bool
	}{
		{"a terminating machine's instance is gone (the planner counts the /24s held)", func() {
			if err := fleet.SetFleetState(gone, api.FleetTerminated, h.Now); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"the store forgets the terminated machine", func() {
			h.Snap.Machines = slices.DeleteFunc(h.Snap.Machines, func(m *api.Machine) bool { return m == gone })
		}, true},
		{"a machine's address changed", func() { a.Addresses = []string{"10.9.9.9"} }, true},
		{"a machine's capacity grew", func() { a.Capacity.MilliCPU *= 4 }, false},
	} {
		step.change()
		h.Step(time.Second)
		h.Heartbeat()
		plan = h.Pass()
		if reused := plan.Booked.ReusedCapacity(); reused != step.reused {
			t.Fatalf("%s: the pass took the last scheduling and plan: %v, want %v", step.what, reused, step.reused)
		}
		grew := strings.Contains(step.what, "grew")
		if placed := len(plan.Assignments) == 1 && plan.Assignments[0].Replica == "big-0"; placed != grew {
			t.Fatalf("%s: big-0 placed: %v (%+v), want %v", step.what, placed, plan.Assignments, grew)
		}
	}
}
