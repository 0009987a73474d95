package scheduler

import (
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// A session that reuses its what-ifs' lists answers each what-if as a
// session that does not: random machines and replicas, what-ifs with a
// random few machines refused, each undone before the next, give the
// same placements and unplaced replicas, and the placements of each
// what-if are in the list the last one used.
func TestReusedWhatIfsAnswerAsFreshOnes(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 3))
	shared, unplaced := 0, 0
	for round := 0; round < 100; round++ {
		ms := randomMachines(rng)
		fresh, reused := clones(ms), clones(ms)
		a, b := NewSession(fresh), NewSession(reused).ReuseWhatIfs()
		var lastList *Placement
		for try := 0; try < 5; try++ {
			rs := randomReplicas(rng)
			refused := map[string]bool{}
			for _, m := range ms {
				refused[m.ID] = rng.IntN(5) == 0
			}
			accepts := func(m *Machine) bool { return !refused[m.ID] }
			want, wantOK := a.PlaceAllOn(slices.Clone(rs), accepts)
			got, gotOK := b.PlaceAllOn(slices.Clone(rs), accepts)
			if gotOK != wantOK || !slices.EqualFunc(got.Placements, want.Placements, samePlacement) || !maps.Equal(got.Unplaced, want.Unplaced) {
				t.Fatalf("round %d, what-if %d: reused lists gave %+v (%v), fresh ones %+v (%v)", round, try, got, gotOK, want, wantOK)
			}
			unplaced += len(got.Unplaced)
			if len(got.Placements) > 0 {
				if &got.Placements[0] == lastList {
					shared++
				}
				lastList = &got.Placements[0]
			}
			undo(fresh, want, rs)
			undo(reused, got, rs)
		}
	}
	if shared == 0 || unplaced == 0 {
		t.Fatalf("%d what-ifs placed in the last one's list, %d replicas left unplaced: the test tried nothing", shared, unplaced)
	}
}

func samePlacement(a, b Placement) bool {
	return a.ReplicaID == b.ReplicaID && a.MachineID == b.MachineID && slices.Equal(a.GPUs, b.GPUs) && a.TEE == b.TEE && a.Note == b.Note
}

// undo takes a what-if's placements off the machines.
func undo(ms []*Machine, res Result, rs []Replica) {
	for _, p := range res.Placements {
		i := slices.IndexFunc(ms, func(m *Machine) bool { return m.ID == p.MachineID })
		Unassign(ms[i], replicaByID(rs, p.ReplicaID), p.GPUs)
	}
}

// A session told NoPreempting evicts no one: a replica that may preempt
// and would evict a lower-priority resident to fit is left unplaced, in
// Place and in PlaceAll, and the resident keeps its room; the same
// replica in a session not told so evicts.
func TestANoPreemptingSessionEvictsNoOne(t *testing.T) {
	urgent := replica("api", 0, 1000, 100)
	urgent.Priority, urgent.Preempt = 10, true
	full := func() *Machine {
		m := machine("a", "g", 1000, 8)
		resident(m, replica("batch", 0, 1000, 100), 0)
		return m
	}
	if res := NewSession([]*Machine{full()}).Place([]Replica{urgent}, nil); len(res.Evictions) != 1 {
		t.Fatalf("a session may preempt, yet it evicted %+v", res.Evictions)
	}
	m := full()
	s := NewSession([]*Machine{m}).NoPreempting()
	if res := s.Place([]Replica{urgent}, nil); len(res.Evictions) != 0 || len(res.Placements) != 0 || res.Unplaced[urgent.ID] == "" {
		t.Fatalf("Place in a session told NoPreempting: %+v", res)
	}
	if res, ok := s.PlaceAll([]Replica{urgent}); ok || len(res.Evictions) != 0 || len(res.Placements) != 0 {
		t.Fatalf("PlaceAll in a session told NoPreempting: %+v (%v)", res, ok)
	}
	if m.Allocated.MilliCPU != 1000 || len(m.Residents) != 1 {
		t.Fatalf("the resident lost its room: %dm booked, residents %+v", m.Allocated.MilliCPU, m.Residents)
	}
}
