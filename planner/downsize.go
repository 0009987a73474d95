package planner

import (
	"cmp"
	"slices"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/scheduler"
)

// downsize moves replicas without rules off new machines into room the
// plan's other machines already pay for (each right-sized: its room is
// what its type holds beyond its replicas), when that lets the machine
// shrink to a cheaper type; the dearest machines try first. Rules decide
// where replicas must go and the opener sizes machines for them; those
// without rules are packed by mix, often on other machines: a tier of
// 4,000 kept apart got 4,000 small machines half empty while the rest
// filled large ones. It reports whether any machine shrank (the caller
// right-sizes again). machines are the plan's session's: live clones and
// new ones, some dropped since.
func (p *planning) downsize(machines []*scheduler.Machine, res *scheduler.Result) bool {
	if len(p.bins) < 2 {
		return false
	}
	shunned, _ := shunnedServices(p.in)
	byID := make(map[string]scheduler.Replica, len(p.in.Pending))
	for _, r := range p.in.Pending {
		if shapeable(&r, shunned) {
			byID[r.ID] = r
		}
	}
	if len(byID) == 0 {
		return false
	}
	movable := map[string][]int{} // new machine → its placements that may move
	for i, pl := range res.Placements {
		if _, ok := byID[pl.ReplicaID]; ok && len(pl.GPUs) == 0 {
			movable[pl.MachineID] = append(movable[pl.MachineID], i)
		}
	}
	kept := p.sessionMachines(machines)
	if scarceRoom(kept, p.leftOutRoom()) < downsizeRoomFloor {
		return false
	}
	machine := make(map[string]*scheduler.Machine, len(kept))
	for _, m := range kept {
		machine[m.ID] = m
	}
	session := scheduler.NewSession(kept)
	// What moves has no rule and no rule selects it (shapeable): the
	// labels and terms of the others need not be learnt.
	var moving []scheduler.Replica
	for _, r := range p.in.Pending {
		if _, ok := byID[r.ID]; ok {
			moving = append(moving, r)
		}
	}
	session.Learn(moving)
	donors := slices.Clone(p.bins)
	slices.SortStableFunc(donors, func(a, b *bin) int { return cmp.Compare(b.offering.PricePerHour, a.offering.PricePerHour) })
	var shrunk []*scheduler.Machine
	for _, b := range donors {
		if len(movable[b.m.ID]) > 0 && p.shrink(b, session, machine, movable, byID, res) {
			// The room it gave up is no longer paid for: it takes no
			// replica from the machines after it.
			session.Exclude(b.m, true)
			shrunk = append(shrunk, b.m)
		}
	}
	for _, m := range shrunk {
		session.Exclude(m, false)
	}
	return len(shrunk) > 0
}

// downsizeRoomFloor: with less of the scarcer of CPU and memory free
// across the machines, there is no room to shed into worth the what-ifs
// (200,000 replicas of the benchmark mix: 0.008% of memory free, 104
// tries, 2 shrank, a tenth of the plan's time).
const downsizeRoomFloor = 0.01

// scarceRoom is the share of the scarcer of CPU and memory the machines
// have free, those left out of the session included.
func scarceRoom(machines []*scheduler.Machine, out roomLeftOut) float64 {
	free, all := out.free, out.allocatable
	for _, m := range machines {
		all = all.Add(m.Allocatable)
		free = free.Add(nonNegative(m.Allocatable.Sub(m.Allocated)))
	}
	if all.MilliCPU == 0 || all.MemoryBytes == 0 {
		return 0
	}
	return min(float64(free.MilliCPU)/float64(all.MilliCPU), float64(free.MemoryBytes)/float64(all.MemoryBytes))
}

func nonNegative(r api.Resources) api.Resources { return maxResources(r, api.Resources{}) }

// sessionMachines are the live machines and the plan's new ones still
// kept: those it opened that compaction dropped are left out (known by
// the plan, not by a set of every live machine's id).
func (p *planning) sessionMachines(machines []*scheduler.Machine) []*scheduler.Machine {
	kept := make(map[*scheduler.Machine]bool, len(p.bins))
	for _, b := range p.bins {
		kept[b.m] = true
	}
	dropped := map[*scheduler.Machine]bool{}
	for _, m := range p.opened {
		if !kept[m] {
			dropped[m] = true
		}
	}
	return slices.DeleteFunc(slices.Clone(machines), func(m *scheduler.Machine) bool { return dropped[m] })
}

// shrink moves the bin's movable replicas where the session finds room
// and keeps the moves when the bin then fits a cheaper type; otherwise
// (or when a move would evict a replica) they go back.
func (p *planning) shrink(b *bin, session *scheduler.Session, machine map[string]*scheduler.Machine, movable map[string][]int, byID map[string]scheduler.Replica, res *scheduler.Result) bool {
	mine := movable[b.m.ID]
	rs := make([]scheduler.Replica, len(mine))
	for k, i := range mine {
		rs[k] = byID[res.Placements[i].ReplicaID]
		scheduler.Unassign(b.m, rs[k], nil)
	}
	session.Exclude(b.m, true)
	moved := session.Fill(rs)
	session.Exclude(b.m, false)
	for _, r := range rs {
		if _, ok := moved.Unplaced[r.ID]; ok {
			session.Rebook(b.m, r, nil)
		}
	}
	cheaper := p.catalog.cheapestHolding(b)
	if len(moved.Evictions) > 0 || len(moved.Placements) == 0 || cheaper == nil || cheaper.offering.PricePerHour >= b.offering.PricePerHour*(1-1e-9) {
		takeBack(moved.Placements, machine, byID)
		for _, pl := range moved.Placements {
			session.Rebook(b.m, byID[pl.ReplicaID], nil)
		}
		return false
	}
	where := make(map[string]int, len(mine))
	for _, i := range mine {
		where[res.Placements[i].ReplicaID] = i
	}
	for _, pl := range moved.Placements {
		i := where[pl.ReplicaID]
		follow(&res.Placements[i], pl)
		movable[pl.MachineID] = append(movable[pl.MachineID], i)
	}
	movable[b.m.ID] = slices.DeleteFunc(mine, func(i int) bool { return res.Placements[i].MachineID != b.m.ID })
	return true
}
