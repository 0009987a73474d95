package decide

import (
	"unsafe"

	"github.com/gantry-dev/gantry/scheduler"
)

// spares are lists of every machine that a consumed booking held and the
// booking made from it did not take over (retire): its skeleton's, its
// census's and its own. A pass that splices or copies such a list fills
// a spare one rather than allocate another (over 48 hours of 10,000
// machines, a third of all that was allocated was these lists, made
// afresh in every pass that launched or ended a machine). A spare is
// never a list the booking being consumed holds: a pass takes spares
// only from bookings consumed before its own.
type spares machineLists

// spares are the scratch's spare lists (a pass's own when it has no
// scratch).
func (p *Pass) spares() *spares { return &p.snap.Scratch.of().spare }

// maxSpares bounds the lists kept of each kind: a pass takes at most
// three of one kind (the ids of its skeleton, census and booking).
const maxSpares = 4

// takeSpare is an empty list with room for n: a spare one when one is
// long enough, else a new one with room for a growing fleet. What a
// spare held is overwritten by the caller's appends, not cleared first.
func takeSpare[T any](pool *[][]T, n int) []T {
	for i, s := range *pool {
		if cap(s) >= n {
			last := len(*pool) - 1
			(*pool)[i], (*pool)[last] = (*pool)[last], nil
			*pool = (*pool)[:last]
			return s[:0]
		}
	}
	return make([]T, 0, n+n/8)
}

// spareCopy is a copy of from in a spare list.
func spareCopy[T any](pool *[][]T, from []T) []T {
	return append(takeSpare(pool, len(from)), from...)
}

// spareZeros is a spare list of n zero values.
func spareZeros[T any](pool *[][]T, n int) []T {
	s := takeSpare(pool, n)[:n]
	clear(s)
	return s
}

// retire keeps as spares the lists prev held that next does not: next
// was made from prev, which is consumed.
func (s *spares) retire(prev, next *Booking) {
	var was, now machineLists
	was.of(prev)
	now.of(next)
	keepSpares(&s.entries, was.entries, now.entries)
	keepSpares(&s.ids, was.ids, now.ids)
	keepSpares(&s.lists, was.lists, now.lists)
	keepSpares(&s.marks, was.marks, now.marks)
	keepSpares(&s.rooms, was.rooms, now.rooms)
	kept := len(s.machines)
	keepSpares(&s.machines, was.machines, now.machines)
	for _, l := range s.machines[kept:] {
		// A spare holds no machine: each entry it pointed to holds its
		// layout's whole array of machines (layOut).
		clear(l[:cap(l)])
	}
}

// poison overwrites every spare, as a harness's proof that nothing kept
// shares one (Scratch.Clear).
func (s *spares) poison() {
	for _, l := range s.entries {
		for i := range l[:cap(l)] {
			l[:cap(l)][i] = skeletonEntry{at: -1, cluster: -1, price: -1}
		}
	}
	for _, l := range s.ids {
		for i := range l[:cap(l)] {
			l[:cap(l)][i] = "(spare)"
		}
	}
	for _, l := range s.lists {
		for i := range l[:cap(l)] {
			l[:cap(l)][i] = ^machineList(0)
		}
	}
	for _, l := range s.marks {
		for i := range l[:cap(l)] {
			l[:cap(l)][i] = censusMark{group: -1, template: -1, key: -1}
		}
	}
	for _, l := range s.rooms {
		for i := range l[:cap(l)] {
			l[:cap(l)][i] = scheduler.Room{Teaches: true}
		}
	}
	for _, l := range s.machines {
		clear(l[:cap(l)])
	}
}

// machineLists are the lists of every machine a booking holds, by kind.
type machineLists struct {
	entries  [][]skeletonEntry
	ids      [][]string
	lists    [][]machineList
	marks    [][]censusMark
	rooms    [][]scheduler.Room
	machines [][]*bookedMachine
}

func (l *machineLists) of(b *Booking) {
	l.ids = append(l.ids, b.ids)
	l.lists = append(l.lists, b.lists)
	l.rooms = append(l.rooms, b.rooms)
	l.machines = append(l.machines, b.machines)
	if sk := b.skeleton; sk != nil {
		l.entries = append(l.entries, sk.entries)
		l.ids = append(l.ids, sk.ids)
		l.lists = append(l.lists, sk.lists)
	}
	if c := b.census; c != nil {
		l.ids = append(l.ids, c.ids)
		l.marks = append(l.marks, c.marks)
	}
	if v := b.view; v != nil {
		l.ids = append(l.ids, v.ids)
		l.lists = append(l.lists, v.lists)
		l.rooms = append(l.rooms, v.rooms)
		l.machines = append(l.machines, v.bookedAt)
	}
}

// keepSpares adds to pool each list of was that shares no memory with a
// list of now or with one pool holds already.
func keepSpares[T any](pool *[][]T, was, now [][]T) {
	for _, l := range was {
		switch {
		case len(*pool) == maxSpares:
			return
		case cap(l) == 0 || sharesAny(l, now) || sharesAny(l, *pool):
			continue
		}
		*pool = append(*pool, l[:0])
	}
}

func sharesAny[T any](l []T, others [][]T) bool {
	for _, o := range others {
		if sharesMemory(l, o) {
			return true
		}
	}
	return false
}

// sharesMemory: a and b overlap in their arrays, to their capacity (a
// list may be a part of another, or clipped from it). The collector does
// not move what the heap holds, so comparing addresses is sound.
func sharesMemory[T any](a, b []T) bool {
	if cap(a) == 0 || cap(b) == 0 {
		return false
	}
	size := unsafe.Sizeof(*new(T))
	a0, b0 := uintptr(unsafe.Pointer(unsafe.SliceData(a))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return a0 < b0+uintptr(cap(b))*size && b0 < a0+uintptr(cap(a))*size
}
