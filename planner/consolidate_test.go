package planner

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/scheduler"
)

// Consolidation leaves out, before it sorts its candidates, the machines
// that could not go at any point of its walk, and out of its what-ifs
// the machines that could take none of the candidates' replicas, the
// candidates among them included (their what-ifs place their replicas on
// the session's machines): random fleets (full, half full and empty
// machines of small and large types, replicas of 250m to 1 CPU, in groups
// at and above their minimum, with and without a savings floor and a
// removal limit; a look that removes one at most leaves out the machines
// whose move could not pay as it begins) get the removals of a walk of every candidate with every
// machine, the shortcuts' plans made in one scratch round after round,
// half of them given the promise that its machines come by id (they
// do), its costs summed in the plan's one walk of the machines when it
// removes nothing.
func TestConsolidationLeavesOutOnlyMachinesThatCannotGo(t *testing.T) {
	rng := seededRand(t, 7)
	var shared Scratch
	removals, leftOut, outOfWhatIfs, outside, gainless, gainlessAtStart, cutShort, fromWalk := 0, 0, 0, 0, 0, 0, 0, 0
	for round := range 600 {
		in, cfg := randomSettledFleet(rng)
		if round%2 == 1 {
			summarizeAsks(rng, in.Machines)
		}
		walked := compute(cfg, in, true)
		in.Scratch = &shared // left as the last round's look left it
		if !slices.IsSortedFunc(in.Machines, func(a, b *Machine) int { return strings.Compare(a.ID, b.ID) }) {
			t.Fatalf("round %d: the fleet's machines are out of the order of their ids", round)
		}
		in.MachinesByID = round%4 < 2
		plan, p := computeWith(cfg, in, false, false)
		p.bound(&plan)
		if !reflect.DeepEqual(plan, walked) {
			t.Fatalf("round %d: leaving machines out\n%+v\nwalking every candidate\n%+v", round, plan.Remove, walked.Remove)
		}
		removals, leftOut, outOfWhatIfs = removals+len(plan.Remove), leftOut+p.leftOut, outOfWhatIfs+p.outOfWhatIfs
		outside, gainless, cutShort = outside+p.whatIfsOutside, gainless+p.gainless, cutShort+p.cutShort
		gainlessAtStart += p.gainlessAtStart
		if len(plan.Remove) == 0 {
			fromWalk++
		}
	}
	if fromWalk == 0 {
		t.Fatal("no plan took its costs from the walk of the machines: the comparison tried too little")
	}
	if removals == 0 || leftOut == 0 || outOfWhatIfs == 0 || outside == 0 || gainless == 0 || gainlessAtStart == 0 || cutShort == 0 {
		t.Fatalf("the fleets drawn gave %d removals, left out %d candidates and %d machines of the what-ifs, tried %d candidates out of them, spared %d what-ifs that could not gain (%d left out as the look began) and ended %d early: the comparison tried too little",
			removals, leftOut, outOfWhatIfs, outside, gainless, gainlessAtStart, cutShort)
	}
	t.Logf("%d removals compared, %d candidates left out, %d machines left out of the what-ifs, %d what-ifs of candidates out of them, %d spared (noGain), %d of them left out as the look began, %d ended early",
		removals, leftOut, outOfWhatIfs, outside, gainless+gainlessAtStart, gainlessAtStart, cutShort)
}

// summarizeAsks gives each machine what its replicas ask, as a pass's
// booking keeps it: every replica counted, and now and then one more
// that no longer runs there (a summary kept as replicas come, not as
// they go, asks at most as much as its replicas).
func summarizeAsks(rng *rand.Rand, ms []*Machine) {
	for _, m := range ms {
		m.Asks, m.AsksKnown = scheduler.NewAsks(), true
		for i := range m.Replicas {
			m.Asks.Add(&m.Replicas[i])
		}
		if rng.IntN(4) == 0 && len(m.Replicas) > 0 {
			gone := m.Replicas[0]
			gone.Requests.MilliCPU /= 2
			m.Asks.Add(&gone)
		}
	}
}

// An overcommitted machine's replacement gives its cluster back the room
// it overdrew, so a machine that could not move away before can after it:
// consolidation must not leave that one out. x (1 CPU, 1.5 CPU booked)
// cannot move onto z and is replaced by a cheaper spot machine; y then
// moves onto z.
func TestConsolidationAfterAnOvercommittedMachineIsReplaced(t *testing.T) {
	g := group("g", 3, 0, 10, itype(1), itype(2), itype(4))
	g.CapacityType = api.CapacityAny
	x := joined("x", "g", itype(1), time.Hour, replicas("x", 6, 250)...)
	y := joined("y", "g", itype(1), time.Hour, replicas("y", 7, 125)...)
	y.CapacityType, y.PricePerHour = api.CapacitySpot, itype(1).Offerings[2].PricePerHour // nothing cheaper holds it
	z := joined("z", "g", itype(4), time.Hour, replicas("z", 12, 250)...)
	z.CapacityType, z.PricePerHour = api.CapacitySpot, itype(4).Offerings[2].PricePerHour
	cfg := DefaultConfig()
	cfg.MaxRemovals = 3
	in := Input{Groups: []*Group{g}, Machines: []*Machine{x, y, z}, Now: now}
	plan := Compute(cfg, in)
	var removed []string
	for _, r := range plan.Remove {
		removed = append(removed, r.MachineID)
	}
	if !slices.Equal(removed, []string{"x", "y"}) || plan.Remove[0].ReplacedBy == "" || plan.Remove[1].ReplacedBy != "" {
		t.Fatalf("removals %+v: want x replaced, then y moved onto z", plan.Remove)
	}
	if walked := compute(cfg, in, true); !reflect.DeepEqual(plan, walked) {
		t.Fatalf("a walk of every candidate plans otherwise: %+v", walked.Remove)
	}
}

// randomSettledFleet is a cluster with nothing pending: machines of two
// groups, most of them full or nearly, in a third of the fleets a few
// overcommitted, groups that may or may not take spot, and settings that
// remove more or less.
func randomSettledFleet(rng *rand.Rand) (Input, Config) {
	var groups []*Group
	var ms []*Machine
	overcommits := rng.IntN(3) == 0
	for gi := range 1 + rng.IntN(2) {
		types := []provisioner.InstanceType{itype(1 + rng.IntN(2)), itype(4 + rng.IntN(5))}
		id := fmt.Sprintf("g%d", gi)
		n := 2 + rng.IntN(8)
		for mi := range n {
			it := types[rng.IntN(len(types))]
			capacity := it.MilliCPU / 250
			load := rng.Int64N(capacity + 1)
			switch draw := rng.IntN(12); {
			case draw == 0 && overcommits: // its replicas' requests grew: free below zero
				load = capacity + 1 + rng.Int64N(capacity)
			case draw > 3: // most machines full or nearly: few can go
				load = max(0, capacity-rng.Int64N(2))
			}
			var rs []scheduler.Replica
			for ri, left := 0, load*250; left > 0; ri++ { // replicas of 250m to 1 CPU
				r := replicas(fmt.Sprintf("%s-m%d", id, mi), 1, min(left, 250*(1+rng.Int64N(4))))[0]
				r.ID = fmt.Sprintf("%s-%d", r.Service, ri)
				rs = append(rs, r)
				left -= r.Requests.MilliCPU
			}
			ms = append(ms, joined(fmt.Sprintf("%s-m%d", id, mi), id, it, time.Duration(rng.IntN(7200))*time.Second, rs...))
		}
		if rng.IntN(3) == 0 { // one of the dearer type just joined, empty: a move onto it cannot pay (noGain)
			ms = append(ms, joined(fmt.Sprintf("%s-m%d", id, n), id, types[1], time.Duration(rng.IntN(120))*time.Second))
			n++
		}
		g := group(id, n, rng.IntN(3), 20, types...)
		g.WarmPool = rng.IntN(2)
		if rng.IntN(2) == 0 { // a larger spot machine may replace a smaller on-demand one
			g.CapacityType = api.CapacityAny
		}
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

// Candidates that come by id are ordered without comparing ids as a sort
// of all three keys orders them: drawn counts of replicas and prices
// (few of each, many ties), ids ascending; one buffer serves every round,
// as a scratch serves every look.
func TestCandidatesByReplicasThenPriceAsASortOfEveryKey(t *testing.T) {
	rng := seededRand(t, 13)
	var buf []keyed
	for round := range 300 {
		var keys []keyed
		for i := range rng.IntN(200) {
			keys = append(keys, keyed{removable: removable{at: int32(i)}, replicas: rng.IntN(1 + rng.IntN(12)),
				price: []float64{0.04, 0.016, 0.08}[rng.IntN(1+rng.IntN(3))], id: fmt.Sprintf("m-%04d", i)})
		}
		sorted := slices.Clone(keys)
		slices.SortFunc(sorted, byEveryKey)
		if got := byReplicasThenPrice(keys, &buf); !slices.Equal(got, sorted) {
			t.Fatalf("round %d: ordered\n%v\nsorted\n%v", round, got, sorted)
		}
	}
}

// A what-if finds a replica it placed by id as a map of the machine's
// replicas would, the last of an id kept, whether they are few (looked
// through) or many (a map): drawn lists of 0 to 40 replicas with
// repeated ids, asked for each id and one absent.
func TestAWhatIfFindsItsReplicasByIDAsAMapWould(t *testing.T) {
	rng := seededRand(t, 17)
	for round := range 200 {
		var held []scheduler.Replica
		for i := range rng.IntN(41) {
			held = append(held, scheduler.Replica{ID: fmt.Sprintf("r%d", rng.IntN(30)), Index: i})
		}
		want := map[string]scheduler.Replica{}
		for _, r := range held {
			want[r.ID] = r
		}
		find := heldByID(held)
		for _, id := range append(slices.Collect(maps.Keys(want)), "absent") {
			if got := find(id); !reflect.DeepEqual(got, want[id]) {
				t.Fatalf("round %d (%d replicas): %s found as %+v, want %+v", round, len(held), id, got, want[id])
			}
		}
	}
}

// A machine goes only if its replicas fit elsewhere as they are: a
// replica that may preempt does not make room for itself by evicting
// another in a what-if (Karpenter's consolidation moves no pod that
// would have to preempt one). Here two machines have a CPU free each,
// and the candidate's replica asks for two: it fits only by evicting a
// low-priority replica, so its machine stays (and so do the others,
// whose replicas the free CPUs cannot hold). With a machine that has
// two free, it goes, and nothing is evicted.
func TestConsolidationEvictsNoneToMoveAReplica(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MinLifetime, cfg.MaxRemovals = 0, 10
	g := group("g", 3, 0, 5, itype(2), itype(4))
	resident := func(id string, n int, priority int) *Machine {
		rs := replicas(id, n, 1000)
		m := joined(id, "g", itype(4), time.Hour, rs...)
		for i := range rs {
			m.Residents = append(m.Residents, scheduler.Resident{Replica: &rs[i], Priority: priority})
		}
		return m
	}
	urgent := replicas("urgent", 1, 2000)
	urgent[0].Rules.Priority, urgent[0].Rules.Preempt = 10, true
	holder := joined("c-urgent", "g", itype(2), time.Hour, urgent...) // full
	holder.Residents = []scheduler.Resident{{Replica: &urgent[0], Priority: 10}}
	fleet := []*Machine{resident("a-low", 3, 0), resident("b-low", 3, 0), holder}
	if p := Compute(cfg, Input{Groups: []*Group{g}, Machines: fleet, Now: now}); len(p.Remove) != 0 {
		t.Fatalf("removed %+v: a move that evicts a lower-priority replica was planned", p.Remove)
	}
	fleet[1] = resident("b-low", 2, 0)
	if p := Compute(cfg, Input{Groups: []*Group{g}, Machines: fleet, Now: now}); len(p.Remove) != 1 || p.Remove[0].MachineID != "c-urgent" {
		t.Fatalf("with room for the urgent replica: removals %+v, want c-urgent alone", p.Remove)
	}
}

// A plan places a waiting replica only where it fits as the machines
// are, never by evicting a lower-priority replica (the scheduler's to do,
// before the planner; a plan has no evictions to tell, and named a
// machine the replica did not fit). Two machines have a CPU free each;
// the waiting replica, which may preempt, asks for two and gets a
// machine of its own.
func TestAPlanEvictsNoneToPlaceAWaitingReplica(t *testing.T) {
	g := group("g", 2, 0, 5, itype(2), itype(4))
	var fleet []*Machine
	for _, id := range []string{"a-low", "b-low"} {
		rs := replicas(id, 3, 1000)
		m := joined(id, "g", itype(4), time.Hour, rs...)
		for i := range rs {
			m.Residents = append(m.Residents, scheduler.Resident{Replica: &rs[i]})
		}
		fleet = append(fleet, m)
	}
	urgent := replicas("urgent", 1, 2000)
	urgent[0].Rules.Priority, urgent[0].Rules.Preempt = 10, true
	p := Compute(DefaultConfig(), Input{Groups: []*Group{g}, Machines: fleet, Pending: urgent, Now: now})
	if len(p.Add) != 1 || len(p.Placements) != 1 || p.Placements[0].Machine != p.Add[0].Key {
		t.Fatalf("the urgent replica: add %+v, placements %+v; want a machine of its own", p.Add, p.Placements)
	}
}

// A look that may remove two machines weighs each at its turn: the
// first move filled the empty machine, whose room a second then takes
// without filling another, though no move could pay as the look began
// (a machine left out then, as a look that removes one at most leaves
// it, would stay).
func TestALookOfTwoRemovalsWeighsTheSecondAfterTheFirst(t *testing.T) {
	g := group("g", 3, 0, 10, itype(2), itype(8), itype(9))
	big := joined("a-big", "g", itype(8), 2*time.Hour, replicas("db", 2, 3500)...)      // first: as many replicas, dearer
	small := joined("b-small", "g", itype(2), 2*time.Hour, replicas("web", 2, 1000)...) // full
	spare := joined("c-spare", "g", itype(9), time.Minute)                              // not yet idle long enough
	spare.PricePerHour = 0.05                                                           // bought cheaper than the big one, dearer than the small
	cfg := DefaultConfig()
	cfg.MaxRemovals = 2
	in := Input{Groups: []*Group{g}, Machines: []*Machine{big, small, spare}, Now: now, MachinesByID: true}
	walked := compute(cfg, in, true)
	plan, p := computeWith(cfg, in, false, false)
	var removed []string
	for _, r := range plan.Remove {
		removed = append(removed, r.MachineID)
	}
	if !slices.Equal(removed, []string{"a-big", "b-small"}) || !reflect.DeepEqual(plan.Remove, walked.Remove) {
		t.Fatalf("removed %v (%d left out as the look began), want both onto the spare machine as the walk of every candidate: %+v", removed, p.gainlessAtStart, walked.Remove)
	}
	cfg.MaxRemovals = 1
	if plan, p := computeWith(cfg, in, false, false); len(plan.Remove) != 1 || plan.Remove[0].MachineID != "a-big" || p.gainlessAtStart != 1 {
		t.Fatalf("one removal at most: removed %+v and left out %d as the look began, want a-big and b-small left out", plan.Remove, p.gainlessAtStart)
	}
}
