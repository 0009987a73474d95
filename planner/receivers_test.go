package planner

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/scheduler"
)

// The placing sessions leave out the machines that could take none of
// the pending replicas: random fleets (full, half full and empty
// machines, some on their way, replicas of 250m to 1 CPU and of more or
// less memory pending, now and then a spread rule, groups near their
// maximum) get the plan of sessions with every machine, the replicas
// left waiting told the same.
func TestPlacingLeavesOutOnlyMachinesThatCannotTakeAPendingReplica(t *testing.T) {
	rng := seededRand(t, 11)
	leftOut, added, waiting, whole := 0, 0, 0, 0
	for round := range 400 {
		in := randomFleetWithPending(rng)
		cfg := DefaultConfig()
		cfg.SavingsFloor = []float64{0, 0.1}[rng.IntN(2)]
		plan, walked := compute(cfg, in, false), compute(cfg, in, true)
		if !reflect.DeepEqual(plan, walked) {
			t.Fatalf("round %d: leaving machines out\n%+v\nwith every machine\n%+v", round, plan, walked)
		}
		// Downsizing asks how much room every machine has, left out or not.
		every, some := &planning{in: in}, &planning{in: in}
		if all, left := scarceRoom(every.shareMachines(nil), roomLeftOut{}), scarceRoom(some.shareMachines(some.placeReceivers(in.Pending)), some.leftOutRoom()); all != left {
			t.Fatalf("round %d: the room of every machine is %v, with %d left out %v", round, all, some.outOfPlace.machines, left)
		}
		_, p := computeWith(cfg, in, false, false)
		leftOut, added, waiting = leftOut+p.outOfPlace.machines, added+len(plan.Add), waiting+len(plan.Pending)
		if p.wholeSessions {
			whole++
		}
	}
	if leftOut == 0 || added == 0 || waiting == 0 || whole == 0 {
		t.Fatalf("the fleets drawn left %d machines out, added %d, left %d replicas waiting (%d planned again with every machine): the comparison tried too little",
			leftOut, added, waiting, whole)
	}
	t.Logf("%d machines left out, %d added, %d replicas left waiting, %d plans made again with every machine", leftOut, added, waiting, whole)
}

// randomFleetWithPending is one or two groups of machines, most of them
// full or nearly, some on their way, and replicas pending.
func randomFleetWithPending(rng *rand.Rand) Input {
	var groups []*Group
	var ms []*Machine
	crowded := rng.IntN(4) == 0 // the fleet's room near downsizing's floor
	for gi := range 1 + rng.IntN(2) {
		types := []provisioner.InstanceType{itype(1 + rng.IntN(2)), itype(4 + rng.IntN(5))}
		id := fmt.Sprintf("g%d", gi)
		n := 2 + rng.IntN(10)
		if crowded {
			n = 20 + rng.IntN(60)
		}
		for mi := range n {
			it := types[rng.IntN(len(types))]
			capacity := it.MilliCPU / 250
			load := rng.Int64N(capacity + 1)
			if rng.IntN(3) > 0 || crowded && rng.IntN(20) > 0 { // most machines full or nearly
				load = max(0, capacity-rng.Int64N(2))
			}
			var rs []scheduler.Replica
			for ri, left := 0, load*250; left > 0; ri++ {
				r := replicas(fmt.Sprintf("%s-m%d", id, mi), 1, min(left, 250*(1+rng.Int64N(4))))[0]
				r.ID = fmt.Sprintf("%s-%d", r.Service, ri)
				rs = append(rs, r)
				left -= r.Requests.MilliCPU
			}
			m := joined(fmt.Sprintf("%s-m%d", id, mi), id, it, time.Duration(rng.IntN(7200))*time.Second, rs...)
			if rng.IntN(6) == 0 {
				m.Joined, m.IdleSince = false, time.Time{}
			}
			ms = append(ms, m)
		}
		g := group(id, n, rng.IntN(2), n+rng.IntN(4), types...)
		groups = append(groups, g)
	}
	var pending []scheduler.Replica
	for si := range 1 + rng.IntN(3) {
		svc := fmt.Sprintf("new%d", si)
		rs := replicas(svc, 1+rng.IntN(12), 250*(1+rng.Int64N(4)))
		memory := int64(1+rng.IntN(3)) << 29
		spread := rng.IntN(8) == 0
		for i := range rs {
			rs[i].Requests.MemoryBytes = memory
			if spread {
				rs[i] = rs[i].Reruled(func(r *scheduler.Rules) { r.Spread = []api.SpreadRule{{Key: api.SpreadMachine, MaxSkew: 1}} })
			}
		}
		pending = append(pending, rs...)
	}
	return Input{Groups: groups, Machines: ms, Pending: pending, Now: now}
}
