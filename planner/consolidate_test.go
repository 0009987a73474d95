package planner

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/scheduler"
)

// Consolidation leaves out, before it sorts its candidates, the machines
// that could not go at any point of its walk: random fleets (full, half
// full and empty machines of small and large types, in groups at and
// above their minimum, with and without a savings floor and a removal
// limit) get the removals of a walk of every candidate.
func TestConsolidationLeavesOutOnlyMachinesThatCannotGo(t *testing.T) {
	rng := seededRand(t, 7)
	removals, leftOut := 0, 0
	for round := range 300 {
		in, cfg := randomSettledFleet(rng)
		walked := compute(cfg, in, true)
		plan, p := computeWith(cfg, in, false, false)
		p.bound(&plan)
		if !reflect.DeepEqual(plan, walked) {
			t.Fatalf("round %d: leaving machines out\n%+v\nwalking every candidate\n%+v", round, plan.Remove, walked.Remove)
		}
		removals, leftOut = removals+len(plan.Remove), leftOut+p.leftOut
	}
	if removals == 0 || leftOut == 0 {
		t.Fatalf("the fleets drawn gave %d removals and left out %d machines: the comparison tried too little", removals, leftOut)
	}
	t.Logf("%d removals compared, %d machines left out", removals, leftOut)
}

// randomSettledFleet is a cluster with nothing pending: machines of two
// groups, most of them full or nearly, and settings that remove more
// or less.
func randomSettledFleet(rng *rand.Rand) (Input, Config) {
	var groups []*Group
	var ms []*Machine
	for gi := range 1 + rng.IntN(2) {
		types := []provisioner.InstanceType{itype(1 + rng.IntN(2)), itype(4 + rng.IntN(5))}
		id := fmt.Sprintf("g%d", gi)
		n := 2 + rng.IntN(8)
		for mi := range n {
			it := types[rng.IntN(len(types))]
			capacity := it.MilliCPU / 250
			load := rng.Int64N(capacity + 1)
			if rng.IntN(3) > 0 { // most machines full or nearly: few can go
				load = max(0, capacity-rng.Int64N(2))
			}
			var rs []scheduler.Replica
			for ri := range load {
				r := replicas(fmt.Sprintf("%s-m%d", id, mi), 1, 250)[0]
				r.ID = fmt.Sprintf("%s-%d", r.Service, ri)
				rs = append(rs, r)
			}
			ms = append(ms, joined(fmt.Sprintf("%s-m%d", id, mi), id, it, time.Duration(rng.IntN(7200))*time.Second, rs...))
		}
		g := group(id, n, rng.IntN(3), 20, types...)
		g.WarmPool = rng.IntN(2)
		groups = append(groups, g)
	}
	cfg := DefaultConfig()
	cfg.SavingsFloor = []float64{0, 0.1, 0.5}[rng.IntN(3)]
	cfg.MaxRemovals = 1 + rng.IntN(4)
	return Input{Groups: groups, Machines: ms, Now: now}, cfg
}

// NextCandidate is the first time a joined machine becomes one: empty
// for EmptyMachineTTL or older than MinLifetime; a time that came already
// or comes exactly now is not next, nor a machine on its way.
func TestNextCandidateIsTheFirstTimeAMachineBecomesOne(t *testing.T) {
	cfg := DefaultConfig()                                                           // idle 5m, lifetime 10m
	busy := joined("busy", "g", itype(2), 7*time.Minute, replicas("web", 1, 500)...) // old enough in 3m
	idle := joined("idle", "g", itype(2), 2*time.Minute)                             // empty long enough in 3m, old enough in 8m
	young := joined("young", "g", itype(2), 4*time.Minute, replicas("api", 1, 500)...)
	young.IdleSince = now.Add(-4*time.Minute + 30*time.Second) // empty long enough in 90s
	young.Replicas = nil
	exact := joined("exact", "g", itype(2), 10*time.Minute) // both times are now
	exact.IdleSince = now.Add(-5 * time.Minute)
	booting := joined("booting", "g", itype(2), time.Second)
	booting.Joined = false
	for _, c := range []struct {
		machines []*Machine
		want     time.Time
	}{
		{[]*Machine{busy}, now.Add(3 * time.Minute)},
		{[]*Machine{busy, idle}, now.Add(3 * time.Minute)},
		{[]*Machine{busy, idle, young}, now.Add(90 * time.Second)},
		{[]*Machine{exact}, time.Time{}},
		{[]*Machine{exact, booting}, time.Time{}},
		{[]*Machine{booting, idle}, now.Add(3 * time.Minute)},
	} {
		if got := NextCandidate(cfg, c.machines, now); !got.Equal(c.want) {
			t.Errorf("%d machines: next candidate at %s, want %s", len(c.machines), got, c.want)
		}
	}
}
