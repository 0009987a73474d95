package planner

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/scheduler"
)

// ComputeAndLooks answers whether consolidation looks from the walk its
// plan made of the machines: random fleets of one to three clusters (each group in
// a cluster of its own draw), some machines not joined yet, some
// replicas pending, consolidation left out or not, get the answer a walk
// of every machine gives, and both answers come up, from clusters kept
// growing by a machine on its way too.
func TestComputeAndLooksAnswersWhatAWalkOfEveryMachineWould(t *testing.T) {
	rng := seededRand(t, 33)
	looked, notLooked, heldByUnjoined := 0, 0, 0
	for round := range 400 {
		in, cfg := randomSettledFleet(rng)
		clusterOf := map[string]string{}
		for _, g := range in.Groups {
			g.Cluster = fmt.Sprintf("c%d", rng.IntN(3))
			clusterOf[g.ID] = g.Cluster
		}
		unjoined := 0
		for _, m := range in.Machines {
			m.Cluster = clusterOf[m.Group]
			if rng.IntN(10) == 0 {
				m.Joined = false
				unjoined++
			}
		}
		if rng.IntN(3) == 0 {
			pending := replicas(fmt.Sprintf("new%d", round), 1+rng.IntN(3), 4000)
			for i := range pending {
				rules := *pending[i].Rules
				rules.Cluster = in.Groups[rng.IntN(len(in.Groups))].Cluster
				pending[i].Rules = &rules
			}
			in.Pending = pending
		}
		in.SkipConsolidation = rng.IntN(2) == 0
		plan, looks := ComputeAndLooks(cfg, in)
		if _, want := consolidationLooks(cfg, in, &plan, nil); looks != want {
			t.Fatalf("round %d: ComputeAndLooks says consolidation looks: %v; a walk of every machine says %v", round, looks, want)
		}
		if looks {
			looked++
			continue
		}
		notLooked++
		in.Machines = joinedOnly(in.Machines)
		if _, looksJoined := consolidationLooks(cfg, in, &plan, nil); unjoined > 0 && looksJoined {
			heldByUnjoined++
		}
	}
	if looked == 0 || notLooked == 0 || heldByUnjoined == 0 {
		t.Fatalf("the fleets drawn looked %d times, not %d times, %d of them for a machine on its way: the comparison tried too little",
			looked, notLooked, heldByUnjoined)
	}
}

func joinedOnly(ms []*Machine) []*Machine {
	var out []*Machine
	for _, m := range ms {
		if m.Joined {
			out = append(out, m)
		}
	}
	return out
}

// walkedSums is what a walk of in's machines sums (MachineSums).
func walkedSums(in Input) *MachineSums {
	sums := &MachineSums{}
	for _, m := range in.Machines {
		sums.PricePerHour += m.PricePerHour
		if !m.Joined {
			if sums.Unjoined == nil {
				sums.Unjoined = map[string]bool{}
			}
			sums.Unjoined[m.Cluster] = true
		}
	}
	return sums
}

// A plan handed its machines' sums plans what one that walks them does,
// and reads them when it leaves consolidation out and fills no warm
// pool: random fleets with machines not joined and replicas pending, each
// planned with the sums a walk finds, without any, and with sums told
// otherwise (which must show in the plan's cost, or the sums went
// unread).
func TestSumsHandedInPlanWhatAWalkWould(t *testing.T) {
	rng := seededRand(t, 34)
	read, walked := 0, 0
	for round := range 300 {
		in, cfg := randomSettledFleet(rng)
		for _, m := range in.Machines {
			m.Cluster = "c"
			if rng.IntN(8) == 0 {
				m.Joined = false
			}
		}
		if rng.IntN(3) == 0 {
			in.Pending = replicas(fmt.Sprintf("new%d", round), 1+rng.IntN(3), 500)
		}
		in.SkipConsolidation = rng.IntN(4) != 0
		without, looksWithout := ComputeAndLooks(cfg, in)
		in.Sums = walkedSums(in)
		with, looksWith := ComputeAndLooks(cfg, in)
		if !reflect.DeepEqual(with, without) || looksWith != looksWithout {
			t.Fatalf("round %d: with the sums a walk finds the plan is\n%+v (looks: %v)\nwithout them\n%+v (looks: %v)", round, with, looksWith, without, looksWithout)
		}
		told := *in.Sums
		told.PricePerHour += 1000
		in.Sums = &told
		otherwise, _ := ComputeAndLooks(cfg, in)
		warm := slices.ContainsFunc(in.Groups, func(g *Group) bool { return g.WarmPool > 0 })
		switch readThem := otherwise.CostBefore != without.CostBefore; {
		case readThem && (!in.SkipConsolidation || warm):
			t.Fatalf("round %d: a plan that consolidates (%v) or fills a warm pool (%v) read the sums handed in", round, !in.SkipConsolidation, warm)
		case readThem:
			read++
		case in.SkipConsolidation && !warm:
			t.Fatalf("round %d: a plan that leaves consolidation out and fills no warm pool walked its machines rather than read the sums", round)
		default:
			walked++
		}
	}
	if read == 0 || walked == 0 {
		t.Fatalf("the fleets drawn read the sums %d times and walked %d times: both must happen", read, walked)
	}
}

// A plan handed its machines' rooms (Input.Rooms) plans what one that
// reads each machine does: random fleets with replicas pending, some
// resident replicas with rules to learn, planned with the rooms the
// machines have and without them; a plan told every machine is full and
// teaches nothing must leave them out of its placing sessions (so their
// room goes unused), or the rooms went unread.
func TestRoomsHandedInPlanWhatReadingEachMachineWould(t *testing.T) {
	rng := seededRand(t, 35)
	differed, taught := 0, 0
	for round := range 300 {
		in, cfg := randomSettledFleet(rng)
		for _, m := range in.Machines {
			if len(m.Replicas) > 0 && rng.IntN(4) == 0 {
				r := m.Replicas[0]
				rules := *r.Rules
				rules.Labels = map[string]string{"app": r.Service}
				rules.Terms = &scheduler.Terms{AntiAffinity: []api.AffinityTerm{{Selector: map[string]string{"tier": "new"}, Topology: "machine"}}}
				r.Rules = &rules
				m.Residents = append(slices.Clone(m.Residents), scheduler.Resident{Replica: &r})
				taught++
			}
		}
		in.Pending = replicas(fmt.Sprintf("new%d", round), 1+rng.IntN(6), 250*(1+rng.Int64N(4)))
		if rng.IntN(2) == 0 { // shunned by the residents' terms, when read
			for i := range in.Pending {
				rules := *in.Pending[i].Rules
				rules.Labels = map[string]string{"tier": "new"}
				in.Pending[i].Rules = &rules
			}
		}
		in.SkipConsolidation = rng.IntN(2) == 0
		without := Compute(cfg, in)
		in.Rooms = make([]scheduler.Room, len(in.Machines))
		for i, m := range in.Machines {
			in.Rooms[i] = m.Room()
		}
		if with := Compute(cfg, in); !reflect.DeepEqual(with, without) {
			t.Fatalf("round %d: with the rooms handed in the plan is\n%+v\nreading each machine\n%+v", round, with, without)
		}
		clear(in.Rooms)
		for i := range in.Rooms {
			in.Rooms[i].Free.MilliCPU = -1
		}
		if full := Compute(cfg, in); !reflect.DeepEqual(full.Add, without.Add) {
			differed++
		}
	}
	if differed == 0 || taught == 0 {
		t.Fatalf("rooms told full changed %d plans, over %d residents with rules to learn: both must happen", differed, taught)
	}
}

// A plan that removes machines costs the fleet before and after as sums
// of the machines' prices in their order, the removed ones left out of
// the second, plus what it adds: random fleets, some pending replicas,
// consolidation on, checked against the machines' own prices (the plan
// sums the prices its walk listed, not each machine read again).
func TestARemovingPlanCostsWhatTheMachinesPricesSum(t *testing.T) {
	rng := seededRand(t, 36)
	removing := 0
	for round := range 300 {
		in, cfg := randomSettledFleet(rng)
		if rng.IntN(3) == 0 {
			in.Pending = replicas(fmt.Sprintf("new%d", round), 1+rng.IntN(3), 500)
		}
		plan := Compute(cfg, in)
		if len(plan.Remove) == 0 {
			continue
		}
		removing++
		gone := map[string]bool{}
		for _, r := range plan.Remove {
			gone[r.MachineID] = true
		}
		var before, after float64
		for _, m := range in.Machines {
			before += m.PricePerHour
			if !gone[m.ID] {
				after += m.PricePerHour
			}
		}
		for _, nm := range plan.Add {
			after += nm.PricePerHour
		}
		if plan.CostBefore != before || plan.CostAfter != after {
			t.Fatalf("round %d: the plan that removes %d machine(s) costs %v before and %v after; the prices sum to %v and %v",
				round, len(plan.Remove), plan.CostBefore, plan.CostAfter, before, after)
		}
	}
	if removing == 0 {
		t.Fatal("no fleet drawn had a machine removed: nothing compared")
	}
}

// A look for machines to remove handed the machines' rooms removes what
// one that reads each machine does: random settled fleets, nothing
// pending, consolidation on. Told that every machine is full and teaches
// nothing, a look finds no machine to move a candidate's replicas onto
// (its what-ifs leave them all out) and counts no room on them, so a
// removal that moved replicas must go, or the rooms went unread.
func TestRoomsHandedToALookRemoveWhatReadingEachMachineWould(t *testing.T) {
	rng := seededRand(t, 37)
	moved := 0
	for range 300 {
		in, cfg := randomSettledFleet(rng)
		in.Pending, in.SkipConsolidation = nil, false
		without := Compute(cfg, in)
		in.Rooms = make([]scheduler.Room, len(in.Machines))
		for i, m := range in.Machines {
			in.Rooms[i] = m.Room()
		}
		if with := Compute(cfg, in); !reflect.DeepEqual(with, without) {
			t.Fatalf("with the rooms handed in the plan is\n%+v\nreading each machine\n%+v", with, without)
		}
		if !slices.ContainsFunc(without.Remove, func(r Removal) bool { return strings.Contains(r.Reason, "fit on other machines") }) {
			continue
		}
		moved++
		for i := range in.Rooms {
			in.Rooms[i] = scheduler.Room{Free: api.Resources{MilliCPU: -1}}
		}
		full := Compute(cfg, in)
		if slices.ContainsFunc(full.Remove, func(r Removal) bool { return strings.Contains(r.Reason, "fit on other machines") }) {
			t.Fatalf("told every machine is full, a look still moved replicas onto one: %+v", full.Remove)
		}
	}
	if moved == 0 {
		t.Fatal("no look moved a machine's replicas away: nothing compared")
	}
}
