package planner

import (
	"fmt"
	"testing"
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
