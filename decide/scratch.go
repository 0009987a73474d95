package decide

import (
	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/planner"
	"github.com/gantry-dev/gantry/scheduler"
)

// Scratch is memory a pass works in that the next pass may reuse: its
// lists of replicas and machines, its view of every machine, the
// booking's notes on each, the scheduler's copies of them and its order,
// remade each pass (most of what a lone change's pass allocated at
// 50,000 machines and 500,000 replicas, and so of how often the
// collector ran). A
// caller that decides pass after pass keeps one and hands it to each
// (Snapshot.Scratch). Nothing a pass returns points into it but the
// view a Booking may leave for the next pass to patch, which is valid
// only while the scratch still holds it (Scratch.views): once Decide
// returns, the rest is garbage for the next pass to overwrite (the
// decide harness clears it after every other pass to prove that). Its
// zero value is ready; passes that share one must not run at once.
type Scratch struct {
	machines []planner.Machine
	// machinesUsed: the last view's length of machines (past it, none
	// points anywhere).
	machinesUsed int
	copies       []scheduler.Machine
	// The pass's replicas and machines (it changes its lists, not the
	// snapshot's).
	replicas    []*api.Replica
	apiMachines []*api.Machine
	// The view's lists of machines, and the booking's notes on each.
	byID        []*planner.Machine
	reused      []int32
	fresh, base [][]*api.Replica
	dirty, seen []bool
	suspect     []bool
	// deploying is a service step's list of its revision's replicas.
	deploying []*api.Replica
	// The scheduler's order of the machines.
	sched scheduler.Scratch
	// The planner's input machines, their rooms, and its own scratch.
	planned []*planner.Machine
	rooms   []scheduler.Room
	planner planner.Scratch
	// spare are the lists of machines the bookings consumed here left
	// (spares.go).
	spare spares
	// views counts the views made here (and clearings): a booking's view
	// is the one the scratch holds while the count is the view's.
	views uint64
}

// of is s, or a scratch for one pass when there is none.
func (s *Scratch) of() *Scratch {
	if s == nil {
		return &Scratch{}
	}
	return s
}

// room is *buf emptied, with room for n (what it held is overwritten by
// the caller's appends, not cleared first).
func room[T any](buf *[]T, n int) []T {
	if cap(*buf) < n {
		*buf = make([]T, 0, n+n/8) // room for a growing fleet
	}
	return (*buf)[:0]
}

// reuse is *buf as a list of n zero values, grown when it is too short.
func reuse[T any](buf *[]T, n int) []T {
	if cap(*buf) < n {
		*buf = make([]T, n, n+n/8) // room for a growing fleet
		return *buf
	}
	*buf = (*buf)[:n]
	clear(*buf)
	return *buf
}

// plannerMachines is an empty list with room for n machines.
func (s *Scratch) plannerMachines(n int) []planner.Machine {
	if s == nil {
		return make([]planner.Machine, 0, n)
	}
	if cap(s.machines) < n {
		s.machines = make([]planner.Machine, 0, n+n/8) // room for a growing fleet
	} else if s.machinesUsed > n {
		// The machines past the view's end keep what they pointed to:
		// each the array of machines of the layout it was booked in.
		clear(s.machines[n:s.machinesUsed])
	}
	s.machinesUsed = n
	return s.machines[:0]
}

// schedulerMachines is a list of n machines for the caller to overwrite
// whole.
func (s *Scratch) schedulerMachines(n int) []scheduler.Machine {
	if s == nil {
		return make([]scheduler.Machine, n)
	}
	if cap(s.copies) < n {
		s.copies = make([]scheduler.Machine, n, n+n/8)
	}
	return s.copies[:n]
}

// LooksFromRecords counts the planner's looks for machines to remove
// that read fewer than every machine (tests).
func (s *Scratch) LooksFromRecords() int { return s.planner.LooksFromRecords() }

// Clear drops what the last pass left in the scratch (a harness's proof
// that nothing it returned points there; the scratch stays ready).
func (s *Scratch) Clear() {
	s.views++
	clear(s.machines[:cap(s.machines)])
	clear(s.copies[:cap(s.copies)])
	clear(s.replicas[:cap(s.replicas)])
	clear(s.apiMachines[:cap(s.apiMachines)])
	clear(s.byID[:cap(s.byID)])
	clear(s.fresh[:cap(s.fresh)])
	clear(s.base[:cap(s.base)])
	clear(s.deploying[:cap(s.deploying)])
	clear(s.planned[:cap(s.planned)])
	clear(s.rooms[:cap(s.rooms)])
	s.sched.Clear()
	s.planner.Clear()
	s.spare.poison()
}
