package decide

import (
	"github.com/gantry-dev/gantry/planner"
	"github.com/gantry-dev/gantry/scheduler"
)

// Scratch is memory a pass works in that the next pass may reuse: its
// view of every machine and the scheduler's copies of them, remade each
// pass (17 MB a pass at 50,000 machines, a quarter of what a lone
// change's pass allocated, and so of how often the collector ran). A
// caller that decides pass after pass keeps one and hands it to each
// (Snapshot.Scratch). Nothing a pass returns points into it: once
// Decide returns, its contents are garbage for the next pass to
// overwrite (the decide harness clears it after every pass to prove
// that). Its zero value is ready; passes that share one must not run at
// once.
type Scratch struct {
	machines []planner.Machine
	copies   []scheduler.Machine
}

// plannerMachines is an empty list with room for n machines.
func (s *Scratch) plannerMachines(n int) []planner.Machine {
	if s == nil {
		return make([]planner.Machine, 0, n)
	}
	if cap(s.machines) < n {
		s.machines = make([]planner.Machine, 0, n+n/8) // room for a growing fleet
	}
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

// Clear drops what the last pass left in the scratch (a harness's proof
// that nothing it returned points there; the scratch stays ready).
func (s *Scratch) Clear() {
	clear(s.machines[:cap(s.machines)])
	clear(s.copies[:cap(s.copies)])
}
