package planner

import "github.com/gantry-dev/gantry/scheduler"

// Scratch is memory a plan works in that the next plan may reuse:
// consolidation's list of every machine's group, its candidates,
// sorted, and its what-ifs' copies of the machines (at 1,000 machines,
// a month's looks allocated a sixth of what its passes did; at 10,000,
// each look zeroed half a megabyte). A caller that plans pass after pass
// keeps one and hands it to each (Input.Scratch). Nothing a plan returns
// points into it. Its zero value is ready; plans that share one must not
// run at once.
type Scratch struct {
	prices      []float64
	eligible    []eligible
	keys, byKey []keyed
	candidates  []removable
	// The what-ifs' machines (those that may receive a candidate's
	// replicas), their copies, ids and replicas.
	receivers      []*Machine
	whatIfs        []scheduler.Machine
	whatIfMachines []*scheduler.Machine
	whatIfIDs      []string
	whatIfReplicas [][]scheduler.Replica
	// memo is what the last look read of each machine.
	memo fleetMemo
}

// of is s, or a scratch for one plan when there is none.
func (s *Scratch) of() *Scratch {
	if s == nil {
		return &Scratch{}
	}
	return s
}

// Clear drops what the last plan left in the scratch (a harness's proof
// that nothing a plan returned points there; the scratch stays ready).
func (s *Scratch) Clear() {
	clear(s.keys[:cap(s.keys)])
	clear(s.byKey[:cap(s.byKey)])
	clear(s.candidates[:cap(s.candidates)])
	clear(s.prices[:cap(s.prices)])
	clear(s.eligible[:cap(s.eligible)])
	clear(s.receivers[:cap(s.receivers)])
	clear(s.whatIfs[:cap(s.whatIfs)])
	clear(s.whatIfMachines[:cap(s.whatIfMachines)])
	clear(s.whatIfIDs[:cap(s.whatIfIDs)])
	clear(s.whatIfReplicas[:cap(s.whatIfReplicas)])
	s.memo.forgotten = true
	clear(s.memo.ids[:cap(s.memo.ids)])
	s.memo.ids = s.memo.ids[:0]
}

// sized is *buf as a list of n, grown when it is too short; what it held
// is left for the caller to overwrite.
func sized[T any](buf *[]T, n int) []T {
	if cap(*buf) < n {
		*buf = make([]T, n, n+n/8) // room for a growing fleet
	}
	*buf = (*buf)[:n]
	return *buf
}
