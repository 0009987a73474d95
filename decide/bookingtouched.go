package decide

import (
	"maps"
	"slices"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/planner"
	"github.com/gantry-dev/gantry/scheduler"
)

// notesOnEach gives the booker its notes on each of the view's machines
// (which to book afresh, with what, and where each kept one was), for a
// booking that walks every machine.
func (b *booker) notesOnEach() {
	n := len(b.v.byID)
	sc := b.p.snap.Scratch.of()
	b.reused, b.fresh, b.dirty = reuse(&sc.reused, n), reuse(&sc.fresh, n), reuse(&sc.dirty, n)
	for i := range b.reused {
		b.reused[i] = -1
	}
}

// patchesInPlace reports whether the pass books only the machines a
// change touched, with no walk of the others (collectTouched): it
// patches the last pass's view, which listed the same machines in the
// same order and on the same lists as its booking, none launched, and
// the machines that may have changed are known without a walk (the
// feed's, either pass's own; no cluster changed, the providers are as
// they were). Every other machine's entry, in the view and the booking,
// is then the booking's where it is. Most passes of a steady fleet are
// such (a walk of every machine in each was a sixth of a quiet pass at
// 900 machines).
func (b *booker) patchesInPlace() bool {
	prev, n := b.prev, len(b.v.byID)
	return b.v.patched && b.v.sorted == n && len(prev.machines) == n && sameMachines(prev.skeleton, b.p.skeleton) &&
		b.changed.Machines != nil && b.sameProviders && len(b.changed.Clusters) == 0 && slices.Equal(b.lists, prev.lists)
}

// collectTouched is collectChanged for a pass that patches in place: it
// looks only at the machines that may have changed (suspects: booked
// afresh unless each is as it was booked) and those the changed
// replicas were and are on.
func (b *booker) collectTouched(ids map[string]bool) {
	prev := b.prev
	b.inPlace, b.sparse = true, map[int32][]*api.Replica{}
	asBooked := true
	suspect := func(id string) {
		i, ok := b.v.position(id)
		if !ok {
			return
		}
		if _, dirty := b.sparse[int32(i)]; dirty {
			return
		}
		if sm := b.schedulerMachine(i); !sameMachine(&sm, b.entries[i], b.lists[i], prev.machines[i]) {
			b.markDirty(i)
			asBooked = false
		}
	}
	for id := range b.changed.Machines {
		suspect(id)
	}
	for id := range prev.ownMachines {
		suspect(id)
	}
	for m := range b.p.mineMachines {
		suspect(m.ID)
	}
	b.v.asBooked = asBooked
	b.next.elsewhere = make(map[string][]*api.Replica, len(prev.elsewhere))
	for id, list := range prev.elsewhere {
		if _, in := b.v.position(id); !in {
			b.next.elsewhere[id] = list
		}
	}
	b.place(ids)
	for i := range b.sparse {
		b.sparse[i] = rebooked(prev.machines[i].replicas, ids, b.incoming[b.v.ids[i]])
	}
	b.rebookElsewhere(ids)
}

// rebookElsewhere books the changed replicas on the machines outside
// the view that they were or are on.
func (b *booker) rebookElsewhere(ids map[string]bool) {
	for id := range b.touched {
		if list := rebooked(b.next.elsewhere[id], ids, b.incoming[id]); len(list) > 0 {
			b.next.elsewhere[id] = list
		} else {
			delete(b.next.elsewhere, id)
		}
	}
}

// bookTouched is book for a pass that patches in place: the booking
// takes the last one's lists over, each entry where it was, and books
// afresh the machines noted, in the view and in its lists.
func (b *booker) bookTouched() *Booking {
	next, prev := b.next, b.prev
	next.machines, next.ids, next.lists, next.touchedOnly = prev.machines, prev.ids, prev.lists, true
	entries := make(bookedEntries, len(b.sparse))
	for _, i := range slices.Sorted(maps.Keys(b.sparse)) {
		list, pm, e := b.sparse[i], b.v.byID[i], b.entries[i]
		*pm = planner.Machine{Machine: b.bookable(int(i)), Joined: e.joined, CreatedAt: e.created.time(), Asks: scheduler.NewAsks(), AsksKnown: true}
		reserve(pm, len(list))
		b.bookMachine(pm, list)
		b.v.noteRewritten(int(i))
		next.machines[i] = entries.of(pm, b.lists[i], list)
	}
	b.keepRooms(next, func(yield func(int) bool) {
		for i := range b.sparse {
			if !yield(int(i)) {
				return
			}
		}
	})
	b.v.booked = true
	b.layOutAfter(next, len(b.sparse))
	return next
}
