package decide

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/planner"
	"github.com/gantry-dev/gantry/scheduler"
)

// Each waiting replica is told the planner's reason, else what the
// machine the planner placed it on waits for, else the scheduler's; a
// replica on a machine, or one nothing explains, is told nothing. The
// sources come by id and are merged, so a test of each precedence and of
// ids on one source only pins the merge.
func TestPendingReasonsPrecedence(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	var replicas []*api.Replica
	for _, id := range []string{"a-0", "a-1", "a-2", "a-3", "a-4", "b-0", "b-1", "c-0"} {
		replicas = append(replicas, &api.Replica{ID: id, Service: id[:1], State: api.ReplicaPending})
	}
	replicas[4].Machine, replicas[4].State = "m-joined", api.ReplicaRunning // a-4 runs
	snap := &Snapshot{Replicas: replicas, InStoreOrder: true, MachinesByID: true,
		Machines: []*api.Machine{{ID: "m-boot"}, {ID: "m-joined", JoinState: api.JoinJoined}}}
	p := newPass(DefaultConfig(), snap, Memory{}, now)
	v := &view{ids: []string{"m-boot", "m-joined"}, sorted: 2,
		byID: []*planner.Machine{{Machine: &scheduler.Machine{ID: "m-boot"}}, {Machine: &scheduler.Machine{ID: "m-joined"}, Joined: true}}}
	plan := planner.Plan{
		Add: []planner.NewMachine{{Key: "new-1", Group: "g", InstanceType: "small", Zone: "z1"}},
		Placements: []planner.ReplicaPlacement{
			{Replica: "a-0", Machine: "new-1"}, {Replica: "a-1", Machine: "m-boot"}, {Replica: "a-2", Machine: "m-joined"},
			{Replica: "a-3", Machine: "new-1"}, {Replica: "a-4", Machine: "m-boot"}},
		Pending: []planner.PendingReplica{{Replica: "a-3", Reason: "the planner's a-3"}, {Replica: "b-0", Reason: "the planner's b-0"}},
	}
	var unplaced []scheduler.Replica
	for _, id := range []string{"a-0", "a-1", "a-2", "a-3", "b-0", "b-1", "c-0"} {
		unplaced = append(unplaced, scheduler.Replica{ID: id})
	}
	schedReasons := map[string]string{"a-0": "the scheduler's a-0", "a-2": "the scheduler's a-2", "b-0": "the scheduler's b-0", "b-1": "the scheduler's b-1"}
	p.setPendingReasons(plan, v, unplaced, whyWaiting{known: schedReasons}, map[string]string{"new-1": "backing off"})
	want := map[string]string{
		"a-0": "waiting for a new small machine in g/z1: backing off",
		"a-1": "waiting for machine m-boot to join",
		"a-2": "the scheduler's a-2",
		"a-3": "the planner's a-3",
		"b-0": "the planner's b-0",
		"b-1": "the scheduler's b-1",
	}
	if !maps.Equal(p.plan.Pending, want) {
		t.Fatalf("reasons %v\nwant %v", p.plan.Pending, want)
	}
	for id, why := range want {
		i, _ := p.index.find(p.replicas, id)
		if r := p.replicas[i]; r.Reason != why || !p.mine[r] {
			t.Errorf("%s: the pass's copy says %q (its own: %v), want %q", id, r.Reason, p.mine[r], why)
		}
	}
}

// A replica told to wait for one machine on its way keeps naming the one
// it waits for already while that one is on its way too; it is told
// afresh when that one joined, failed to join, is ending or is gone, when
// its reason named no machine on its way, and when the new reason is not
// a machine's join.
func TestAJoinWaitIsKeptOnlyWhileItsMachineIsOnItsWay(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	was := map[string]string{
		"a-0": "waiting for machine m-boot to join",   // kept
		"a-1": "waiting for machine m-joined to join", // joined: told
		"a-2": "waiting for machine m-gone to join",   // gone: told
		"a-3": "0/2 machines fit: 2 insufficient cpu", // no machine: told
		"a-4": "waiting for machine m-boot to join",   // told a planner's reason
		"a-5": "waiting for machine m-boot-2 to join", // told the same
		"a-6": "waiting for machine m-failed to join", // its join failed: told
		"a-7": "waiting for machine m-ending to join", // terminating: told
	}
	var replicas []*api.Replica
	for _, id := range []string{"a-0", "a-1", "a-2", "a-3", "a-4", "a-5", "a-6", "a-7"} {
		replicas = append(replicas, &api.Replica{ID: id, Service: "a", State: api.ReplicaPending, Reason: was[id]})
	}
	snap := &Snapshot{Replicas: replicas, InStoreOrder: true, MachinesByID: true,
		Machines: []*api.Machine{{ID: "m-boot"}, {ID: "m-boot-2"}, {ID: "m-ending", FleetState: api.FleetTerminating},
			{ID: "m-failed", JoinState: api.JoinFailed}, {ID: "m-joined", JoinState: api.JoinJoined}}}
	p := newPass(DefaultConfig(), snap, Memory{}, now)
	// The view has every machine, as one read before the pass ended one
	// would: what the pass holds of each decides.
	v := &view{ids: []string{"m-boot", "m-boot-2", "m-ending", "m-failed", "m-joined"}, sorted: 5, byID: []*planner.Machine{
		{Machine: &scheduler.Machine{ID: "m-boot"}}, {Machine: &scheduler.Machine{ID: "m-boot-2"}},
		{Machine: &scheduler.Machine{ID: "m-ending"}}, {Machine: &scheduler.Machine{ID: "m-failed"}},
		{Machine: &scheduler.Machine{ID: "m-joined"}, Joined: true}}}
	plan := planner.Plan{
		Placements: []planner.ReplicaPlacement{
			{Replica: "a-0", Machine: "m-boot-2"}, {Replica: "a-1", Machine: "m-boot-2"}, {Replica: "a-2", Machine: "m-boot-2"},
			{Replica: "a-3", Machine: "m-boot-2"}, {Replica: "a-4", Machine: "m-boot-2"}, {Replica: "a-5", Machine: "m-boot-2"},
			{Replica: "a-6", Machine: "m-boot-2"}, {Replica: "a-7", Machine: "m-boot-2"}},
		Pending: []planner.PendingReplica{{Replica: "a-4", Reason: "the planner's a-4"}},
	}
	p.setPendingReasons(plan, v, nil, whyWaiting{}, nil)
	onItsWay := "waiting for machine m-boot-2 to join"
	want := map[string]string{"a-0": was["a-0"], "a-1": onItsWay, "a-2": onItsWay, "a-3": onItsWay, "a-4": "the planner's a-4", "a-5": onItsWay,
		"a-6": onItsWay, "a-7": onItsWay}
	if !maps.Equal(p.plan.Pending, want) {
		t.Fatalf("reasons %v\nwant %v", p.plan.Pending, want)
	}
	if want := []string{"a-1", "a-2", "a-3", "a-4", "a-6", "a-7"}; !slices.Equal(p.plan.PendingChanged, want) {
		t.Fatalf("reasons to write %v, want %v", p.plan.PendingChanged, want)
	}
}
