package scheduler

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gantry-dev/gantry/api"
)

// apartWorkload draws services labelled tier=a, tier=b or nothing, some
// keeping apart on machines from a tier (their own or the other) or
// from their own service, with requests that make machines fill.
func apartWorkload(rng *rand.Rand) []Replica {
	var pending []Replica
	for s := range 2 + rng.IntN(6) {
		svc := fmt.Sprintf("s%d", s)
		var labels map[string]string
		switch rng.IntN(3) {
		case 0:
			labels = map[string]string{"tier": "a"}
		case 1:
			labels = map[string]string{"tier": "b"}
		}
		var terms *Terms
		switch rng.IntN(4) {
		case 0:
			terms = &Terms{AntiAffinity: required(api.SpreadMachine, map[string]string{"tier": "a"})}
		case 1:
			terms = &Terms{AntiAffinity: required(api.SpreadMachine, map[string]string{"tier": "b"})}
		case 2:
			labels = map[string]string{"app": svc}
			terms = &Terms{AntiAffinity: required(api.SpreadMachine, labels)}
		}
		cpu, mem := int64(100*(1+rng.IntN(10))), int64(128*(1+rng.IntN(8)))
		for i := range 1 + rng.IntN(8) {
			r := labelled(replica(svc, i, cpu, mem), labels)
			r.Terms = terms
			pending = append(pending, r)
		}
	}
	return pending
}

// keptApart fails the test when a machine holds a replica whose required
// anti-affinity on machine selects another replica there (either way
// round: the one selected keeps off too).
func keptApart(t *testing.T, what string, byMachine map[string][]Replica) {
	t.Helper()
	for m, rs := range byMachine {
		if a, b, broken := KeptApartBroken(rs); broken {
			t.Fatalf("%s: %s and %s share %s, but %s keeps apart from them", what, a.ID, b.ID, m, a.ID)
		}
	}
}

// Replicas that keep apart on machines, placed by the apart index and
// then moved by what-ifs (replicas unbooked, their machine excluded,
// placed again, as compaction does), never share a machine with what
// they keep apart from: random workloads on random fleets.
func TestApartIndexKeepsAntiAffinity(t *testing.T) {
	for seed := uint64(1); seed <= 300; seed++ {
		rng := rand.New(rand.NewPCG(seed, 32))
		var ms []*Machine
		for i := range 2 + rng.IntN(10) {
			ms = append(ms, machine(fmt.Sprintf("m%02d", i), "g", int64(1000*(1+rng.IntN(8))), int64(1+rng.IntN(8))))
		}
		pending := apartWorkload(rng)
		byID := map[string]Replica{}
		for _, r := range pending {
			byID[r.ID] = r
		}
		s := NewSession(ms)
		res := s.Place(pending, nil)
		on := map[string]string{}
		for _, p := range res.Placements {
			on[p.ReplicaID] = p.MachineID
		}
		check := func(what string) {
			t.Helper()
			byMachine := map[string][]Replica{}
			for id, m := range on {
				byMachine[m] = append(byMachine[m], byID[id])
			}
			keptApart(t, fmt.Sprintf("seed %d, %s", seed, what), byMachine)
		}
		check("placed")
		machineByID := map[string]*Machine{}
		for _, m := range ms {
			machineByID[m.ID] = m
		}
		for round := range 5 {
			bin := ms[rng.IntN(len(ms))]
			var moving []Replica
			for id, m := range on {
				if m == bin.ID {
					moving = append(moving, byID[id])
				}
			}
			for _, r := range moving {
				Unassign(bin, r, nil)
				delete(on, r.ID)
			}
			s.Exclude(bin, true)
			moved, ok := s.PlaceAll(moving)
			s.Exclude(bin, false)
			if !ok {
				for _, p := range moved.Placements {
					Unassign(machineByID[p.MachineID], byID[p.ReplicaID], nil)
				}
				for _, r := range moving {
					Assign(bin, r, nil)
					on[r.ID] = bin.ID
				}
				continue
			}
			for _, p := range moved.Placements {
				on[p.ReplicaID] = p.MachineID
			}
			check(fmt.Sprintf("what-if %d moved %d off %s", round, len(moving), bin.ID))
		}
	}
}
