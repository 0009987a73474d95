package planner

import (
	"sort"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/scheduler"
)

// compact empties new machines whose replicas fit on the plan's other
// machines, fewest replicas first: the order consolidation uses. One pass
// reaches the fixpoint, because emptying a machine only takes free space
// away from the others: a machine that could not be emptied cannot be
// later. Applied and planned again, the plan proposes no removal.
func (p *planning) compact(session *scheduler.Session, res *scheduler.Result, pending []scheduler.Replica) {
	all := session.Machines()
	byID := make(map[string]scheduler.Replica, len(pending))
	for _, r := range pending {
		byID[r.ID] = r
	}
	on := map[string][]scheduler.Replica{}
	where := map[string]int{} // replica → index in res.Placements
	for i, pl := range res.Placements {
		on[pl.MachineID] = append(on[pl.MachineID], byID[pl.ReplicaID])
		where[pl.ReplicaID] = i
	}
	machine := make(map[string]*scheduler.Machine, len(all))
	for _, m := range all {
		machine[m.ID] = m
	}
	dropped := map[string]bool{}
	free := map[string]api.Resources{} // per cluster, for a quick "cannot fit" check
	for _, m := range all {
		free[m.Cluster] = free[m.Cluster].Add(m.Free())
	}
	for _, b := range p.compactionOrder(on, dropped) {
		key := Key(b.group.Cluster, b.group.ID)
		if b.group.Live+p.added[key] <= b.group.MinSize {
			continue
		}
		used := b.m.Allocated
		room := free[b.m.Cluster].Sub(b.m.Free())
		if !room.Fits(api.Resources{MilliCPU: used.MilliCPU, MemoryBytes: used.MemoryBytes, EphemeralBytes: used.EphemeralBytes}) {
			continue
		}
		if p.moveBin(b, session, machine, on, res, where) {
			free[b.m.Cluster] = free[b.m.Cluster].Sub(b.m.Allocatable)
			p.added[key]--
			dropped[b.m.ID] = true
		}
	}
	kept := p.bins[:0]
	for _, b := range p.bins {
		if !dropped[b.m.ID] {
			kept = append(kept, b)
		}
	}
	p.bins = kept
}

func (p *planning) compactionOrder(on map[string][]scheduler.Replica, dropped map[string]bool) []*bin {
	var out []*bin
	for _, b := range p.bins {
		if !dropped[b.m.ID] && len(on[b.m.ID]) > 0 {
			out = append(out, b)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, c := out[i], out[j]
		if len(on[a.m.ID]) != len(on[c.m.ID]) {
			return len(on[a.m.ID]) < len(on[c.m.ID])
		}
		if a.m.PricePerHour != c.m.PricePerHour {
			return a.m.PricePerHour > c.m.PricePerHour
		}
		return a.m.ID < c.m.ID
	})
	return out
}

// moveBin places a bin's replicas on the other machines of the session;
// on success the placements follow them and the bin stays out of the
// session, on failure nothing changes.
func (p *planning) moveBin(b *bin, session *scheduler.Session, machine map[string]*scheduler.Machine, on map[string][]scheduler.Replica, res *scheduler.Result, where map[string]int) bool {
	mine := on[b.m.ID]
	// The replicas leave first, so that spread rules count them where
	// they go, not where they were.
	for _, r := range mine {
		scheduler.Unassign(b.m, r, res.Placements[where[r.ID]].GPUs)
	}
	session.Exclude(b.m, true)
	moved, ok := session.PlaceAll(mine)
	byID := map[string]scheduler.Replica{}
	for _, r := range mine {
		byID[r.ID] = r
	}
	if !ok {
		takeBack(moved.Placements, machine, byID)
		session.Exclude(b.m, false)
		for _, r := range mine {
			session.Rebook(b.m, r, res.Placements[where[r.ID]].GPUs)
		}
		return false
	}
	for _, pl := range moved.Placements {
		follow(&res.Placements[where[pl.ReplicaID]], pl)
		on[pl.MachineID] = append(on[pl.MachineID], byID[pl.ReplicaID])
	}
	delete(on, b.m.ID)
	return true
}

// takeBack undoes a what-if's placements: each replica leaves the
// machine the session put it on (the caller books it back where it was).
func takeBack(moved []scheduler.Placement, machine map[string]*scheduler.Machine, byID map[string]scheduler.Replica) {
	for _, pl := range moved {
		scheduler.Unassign(machine[pl.MachineID], byID[pl.ReplicaID], pl.GPUs)
	}
}

// follow points a placement of the plan at where a what-if moved its
// replica.
func follow(into *scheduler.Placement, moved scheduler.Placement) {
	into.MachineID, into.GPUs, into.TEE, into.Note = moved.MachineID, moved.GPUs, moved.TEE, moved.Note
}
