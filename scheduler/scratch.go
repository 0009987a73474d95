package scheduler

// Scratch is memory a session works in that the next session may reuse:
// its order of the machines (two lists as long as the fleet, made for
// every session otherwise). Nothing a session returns points into it.
// Its zero value is ready; sessions that share one must not run at once,
// and a session made in it is done once the next is made.
type Scratch struct {
	byScore []scored
	order   []*Machine
	// sorting and keys are sortByScore's working lists.
	sorting []scored
	keys    []uint64
}

// NewSession is NewSession working in s (nil: in lists of its own).
func (s *Scratch) NewSession(machines []*Machine) *Session {
	return &Session{st: newState(machines, s)}
}

// Schedule is Schedule working in s (nil: in lists of its own).
func (s *Scratch) Schedule(machines []*Machine, pending []Replica) Result {
	if len(pending) == 0 {
		return Result{Unplaced: map[string]string{}}
	}
	return s.NewSession(machines).Place(pending, nil)
}

// Clear drops what the last session left (the scratch stays ready).
func (s *Scratch) Clear() {
	clear(s.byScore[:cap(s.byScore)])
	clear(s.order[:cap(s.order)])
	clear(s.sorting[:cap(s.sorting)])
}

// lists are the session's lists for n machines (nil s: new ones).
func (s *Scratch) lists(n int) ([]scored, []*Machine) {
	if s == nil {
		return make([]scored, n), make([]*Machine, n)
	}
	if cap(s.byScore) < n {
		s.byScore, s.order = make([]scored, n, n+n/8), make([]*Machine, n, n+n/8)
	}
	return s.byScore[:n], s.order[:n:n] // the order clipped: a machine opened is appended to a copy
}

// sortLists are sortByScore's working lists for n machines (nil s: new
// ones).
func (s *Scratch) sortLists(n int) ([]scored, []uint64) {
	if s == nil {
		return make([]scored, n), make([]uint64, 2*n)
	}
	if cap(s.sorting) < n {
		s.sorting, s.keys = make([]scored, n, n+n/8), make([]uint64, 2*n, 2*(n+n/8))
	}
	return s.sorting[:n], s.keys[:2*n]
}
