package planner

import (
	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/scheduler"
)

// mayReceive says which machines could take one of consolidation's
// candidates' replicas in a what-if (nil: any): those that may take one
// of them (scheduler.Asks). A candidate that may not stays out of the
// what-ifs' session too: its own what-if places its replicas on the
// session's machines, as it would with it there, emptied and excluded
// (a session of the 3,500 candidates of 10,000 machines was built for
// every removal).
func (p *planning) mayReceive(candidates []removable) func(int, *Machine) bool {
	if p.noShortcuts {
		return nil
	}
	a := scheduler.NewAsks()
	for _, c := range candidates {
		if !c.m.countAsks(&a) {
			return nil
		}
	}
	if rooms := p.in.Rooms; rooms != nil {
		return func(i int, _ *Machine) bool { return a.MayTakeRoom(rooms[i]) }
	}
	return func(_ int, m *Machine) bool { return a.MayTake(m.Machine) }
}

// countAsks counts what the machine's replicas ask into a, from its
// summary when known; false as Asks.Add.
func (m *Machine) countAsks(a *scheduler.Asks) bool {
	if m.AsksKnown {
		return a.Merge(&m.Asks)
	}
	for i := range m.Replicas {
		if !a.Add(&m.Replicas[i]) {
			return false
		}
	}
	return true
}

// placeReceivers says which live machines the placing sessions (place,
// then compaction and downsizing, which move only pending replicas) may
// put a pending replica on, by their place in the input and themselves
// (nil: any); it reads their rooms from the input when it has them.
func (p *planning) placeReceivers(pending []scheduler.Replica) func(int, *Machine) bool {
	if p.noShortcuts || p.wholeSessions {
		return nil
	}
	a := scheduler.NewAsks()
	for i := range pending {
		if !a.Add(&pending[i]) {
			return nil
		}
	}
	if rooms := p.in.Rooms; rooms != nil {
		return func(i int, _ *Machine) bool { return a.MayTakeRoom(rooms[i]) }
	}
	return func(_ int, m *Machine) bool { return a.MayTake(m.Machine) }
}

// roomLeftOut counts the machines left out of the placing sessions;
// downsizing asks how much room they have (leftOutRoom).
type roomLeftOut struct {
	machines          int
	allocatable, free api.Resources
}

// shareMachines copies the input's machines that receives lets in (nil:
// every one) for the plan's session, in one allocation; each shares its
// counts of services and its devices with the input's until the session
// books or unbooks on it (which copies them first): most of a fleet's
// machines take nothing new in a plan. Those left out are counted, not
// read.
func (p *planning) shareMachines(receives func(int, *Machine) bool) []*scheduler.Machine {
	p.receives = receives
	in := p.in.Machines
	if receives != nil {
		in = make([]*Machine, 0, len(p.in.Machines))
		for i, m := range p.in.Machines {
			if receives(i, m) {
				in = append(in, m)
				continue
			}
			p.outOfPlace.machines++
		}
	}
	out := make([]*scheduler.Machine, len(in))
	copies := make([]scheduler.Machine, len(in)) // only as many as go in: a fleet's worth is zeroed otherwise
	for i, m := range in {
		m.ShareInto(&copies[i])
		out[i] = &copies[i]
	}
	return out
}

// leftOutRoom is the machines the placing sessions left out, with their
// room: read from each only when downsizing asks (a plan that opens two
// machines or more).
func (p *planning) leftOutRoom() roomLeftOut {
	out := roomLeftOut{machines: p.outOfPlace.machines}
	if out.machines == 0 {
		return out
	}
	for i, m := range p.in.Machines {
		if !p.receives(i, m) {
			out.allocatable = out.allocatable.Add(m.Allocatable)
			out.free = out.free.Add(nonNegative(m.Free()))
		}
	}
	return out
}
