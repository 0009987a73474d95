package scheduler

// Scratch is memory a session works in that the next session may reuse:
// its order of the machines (two lists as long as the fleet, made for
// every session otherwise). Nothing a session returns points into it.
// Its zero value is ready; sessions that share one must not run at once,
// and a session made in it is done once the next is made.
type Scratch struct {
	byScore []scored
	order   []*Machine
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
