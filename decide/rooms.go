package decide

import "iter"

// keepRooms gives the booking the rooms of its machines: the last
// booking's, where each machine kept was (taken over, or copied when the
// machines moved), and each machine booked afresh's read anew.
func (b *booker) keepRooms(next *Booking, afresh iter.Seq[int]) {
	n := len(next.machines)
	switch prev := b.prev; {
	case prev == nil || len(prev.rooms) != len(prev.machines):
		next.rooms = spareZeros(&b.p.spares().rooms, n)
		afresh = func(yield func(int) bool) { // every one
			for k := range n {
				if !yield(k) {
					return
				}
			}
		}
	case b.inPlace && len(prev.rooms) == n:
		next.rooms = prev.rooms
	default:
		next.rooms = spareZeros(&b.p.spares().rooms, n)
		for i, j := range b.reused[:n] {
			if j >= 0 {
				next.rooms[i] = prev.rooms[j]
			}
		}
	}
	for i := range afresh {
		next.rooms[i] = next.machines[i].pm.Machine.Room()
	}
	b.v.rooms, b.v.bookedAt = next.rooms, next.machines
}
