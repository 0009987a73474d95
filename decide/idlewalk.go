package decide

import (
	"slices"
	"time"

	"github.com/gantry-dev/gantry/planner"
)

// idleWalk is what walkView found of a view's entries: the places of the
// empty joined machines, and of the joined machines made after madeBy
// (younger than their minimum lifetime), the only entries a later walk
// may have to set or read while they stay as they are. partly: the walk
// walked only the entries that could need it (placesToWalk).
type idleWalk struct {
	idle, young []int32
	ids         []string // the view's, by place
	madeBy      time.Time
	partly      bool
}

// walkView remembers since when each joined machine has been empty, and
// finds when the next machine becomes a consolidation candidate
// (candidateAt), in one walk of the machines (two walks were a cache
// miss each for each of 10,000 machines, in every pass). The idle are
// few: the memory's idle entries are found among the machines, not each
// machine with replicas looked up in the memory. A view patched from the
// last pass's (in place or spliced) walks only the entries that may need
// it (placesToWalk): the first read of each of 10,000 entries was a
// tenth of a day's passes.
func (p *Pass) walkView(v *view) {
	madeBy := p.now.Add(-p.cfg.Planner.MinLifetime)
	places, partly := placesToWalk(v, madeBy, p.cfg.WalkShare)
	for id := range p.mem.IdleSince {
		if pm := v.machine(id); pm != nil && pm.Joined && len(pm.Replicas) > 0 {
			delete(owned(&p.mem.IdleSince, &p.owns.idle), id)
		}
	}
	clock := planner.NewCandidateClock(p.cfg.Planner, p.now)
	walk := &idleWalk{ids: v.ids, madeBy: madeBy, partly: partly}
	if partly {
		slices.Sort(places)
		for _, i := range slices.Compact(places) {
			p.walkEntry(v.byID[i], i, &clock, walk)
		}
	} else {
		for i, pm := range v.byID {
			p.walkEntry(pm, int32(i), &clock, walk)
		}
	}
	v.walk = walk
	p.candidateAt = clock.Next()
}

// walkEntry sets the idle time of the view's entry at place i if it is
// empty, notes it in walk, and has the clock see it.
func (p *Pass) walkEntry(pm *planner.Machine, i int32, clock *planner.CandidateClock, walk *idleWalk) {
	if !pm.Joined {
		return
	}
	if len(pm.Replicas) == 0 {
		since, idle := p.mem.IdleSince[pm.ID]
		if !idle {
			since = p.now
			owned(&p.mem.IdleSince, &p.owns.idle)[pm.ID] = since
		}
		pm.IdleSince = since
		walk.idle = append(walk.idle, i)
	}
	if pm.CreatedAt.After(walk.madeBy) {
		walk.young = append(walk.young, i)
	}
	clock.See(pm)
}

// placesToWalk are the places of the entries walkView must walk
// (partly false: every entry). The view is the last pass's, patched
// (each machine kept at the place the last walk found it, or where the
// splice of the machines made and ended since moved it), and that pass
// walked it. An entry not booked afresh since is then as that walk left
// it, or put back as booked (restoreTouched): as that walk found it, but
// for the idle time it set if the entry was empty (walked, then). If it
// was not empty then, it has replicas and no idle time (only a walk sets
// one, on an empty entry; booking afresh clears it), or it has not
// joined: a walk sets nothing on it, and the memory keeps no idle time
// for it that a walk would not remove too. If it was not young then, it
// is not now (madeBy is no earlier): the clock learns nothing from it.
// Machines the pass launched have not joined. Past share of the view,
// every entry is walked.
func placesToWalk(v *view, madeBy time.Time, share float64) ([]int32, bool) {
	last := v.walkedBefore
	if last == nil || madeBy.Before(last.madeBy) {
		return nil, false
	}
	n := len(v.rewritten) + len(last.idle) + len(last.young)
	if float64(n) > share*float64(len(v.byID)) {
		return nil, false
	}
	places := append(make([]int32, 0, n), v.rewritten...)
	if v.from == nil {
		return append(append(places, last.idle...), last.young...), true
	}
	for _, k := range slices.Concat(last.idle, last.young) { // moved by the splice, or ended
		if i, ok := v.position(last.ids[k]); ok {
			places = append(places, int32(i))
		}
	}
	return places, true
}

// noteRewritten notes that the booking wrote the entry at place i of a
// view it patched (placesToWalk).
func (v *view) noteRewritten(i int) {
	if v.patched {
		v.rewritten = append(v.rewritten, int32(i))
	}
}
