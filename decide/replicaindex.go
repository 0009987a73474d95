package decide

import (
	"slices"
	"strings"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/replica"
)

// replicaIndex finds a pass's replicas by id. The store lists replicas by
// service and id, and every id begins with its service's name and a dash
// (replica.ID), so a binary search finds one: a map of every replica,
// built each pass, took 0.1 s of a pass at 500,000 replicas. The
// replicas the pass makes, and every replica of a snapshot in another
// order (tests build such), are in a map.
type replicaIndex struct {
	// sorted: replicas[:sorted] are the snapshot's, by service and id.
	sorted int
	// at are the positions of the others.
	at map[string]int
	// ordered: the snapshot's replicas were in the store's order.
	ordered bool
}

func byServiceAndID(a, b *api.Replica) int { return againstServiceAndID(a, [2]string{b.Service, b.ID}) }

func newReplicaIndex(replicas []*api.Replica) replicaIndex {
	return indexOf(replicas, slices.IsSortedFunc(replicas, byServiceAndID) && !slices.ContainsFunc(replicas, idOutsideService))
}

// indexOf is the index of replicas, which are by service and id, each id
// within its service, if inOrder.
func indexOf(replicas []*api.Replica, inOrder bool) replicaIndex {
	if inOrder {
		return replicaIndex{sorted: len(replicas), at: map[string]int{}, ordered: true}
	}
	x := replicaIndex{at: make(map[string]int, len(replicas))}
	for i, r := range replicas {
		x.at[r.ID] = i
	}
	return x
}

// idOutsideService: r's id does not begin with its service's name and a
// dash.
func idOutsideService(r *api.Replica) bool { return !replica.NamedInService(r) }

// find is the position of the replica of that id.
func (x *replicaIndex) find(replicas []*api.Replica, id string) (int, bool) {
	if i, ok := x.at[id]; ok {
		return i, true
	}
	// The service is the id up to one of its dashes: the last first, as
	// replica.ID ends an id with a dash and a number (a service "web-api"
	// was searched as "web" first). Ids are unique: one search can match.
	for n := strings.LastIndexByte(id, '-'); n >= 0; n = strings.LastIndexByte(id[:n], '-') {
		if i, ok := x.search(replicas, id[:n], id); ok {
			return i, true
		}
	}
	return 0, false
}

// findOf is the position of the replica of that service and id.
func (x *replicaIndex) findOf(replicas []*api.Replica, service, id string) (int, bool) {
	if i, ok := x.at[id]; ok {
		return i, true
	}
	return x.search(replicas, service, id)
}

func (x *replicaIndex) search(replicas []*api.Replica, service, id string) (int, bool) {
	return slices.BinarySearchFunc(replicas[:x.sorted], [2]string{service, id}, againstServiceAndID)
}

// againstServiceAndID compares r with a key of a service and an id, the
// id only within the service: cmp.Or's arguments are both evaluated, and
// two string compares at each step were most of a search (a pass
// searches for every replica it changed).
func againstServiceAndID(r *api.Replica, key [2]string) int {
	if r.Service != key[0] {
		return strings.Compare(r.Service, key[0])
	}
	return strings.Compare(r.ID, key[1])
}

// add records a replica appended at position i.
func (x *replicaIndex) add(id string, i int) { x.at[id] = i }

// without is replicas without those at the positions drop (ascending,
// each once), the index following them. What lies between two dropped
// replicas moves down in one copy, and only the replicas after the first
// dropped one that the map indexes are noted again: a walk that asked
// of each replica whether it went cost an acting pass a lookup for
// every replica of the fleet.
func (x *replicaIndex) without(replicas []*api.Replica, drop []int) []*api.Replica {
	if len(drop) == 0 {
		return replicas
	}
	sorted := x.sorted
	kept := drop[0]
	for k, at := range drop {
		delete(x.at, replicas[at].ID)
		if at < x.sorted {
			sorted--
		}
		end := len(replicas)
		if k+1 < len(drop) {
			end = drop[k+1]
		}
		kept += copy(replicas[kept:], replicas[at+1:end])
	}
	x.sorted = sorted
	for i := max(sorted, drop[0]); i < kept; i++ {
		x.at[replicas[i].ID] = i
	}
	return replicas[:kept]
}

// replicasAmong are the pass's replicas of those ids and those it copied
// or made, in the pass's order: what a walk of every replica finds when
// the snapshot vouches that no other can match (a walk of 500,000
// replicas cost a large fleet's pass tens of milliseconds each time).
func (p *Pass) replicasAmong(ids []string) []*api.Replica {
	at := p.positionsAmong(ids)
	out := make([]*api.Replica, len(at))
	for k, i := range at {
		out[k] = p.replicas[i]
	}
	return out
}

// positionsAmong are the positions in the pass's replicas of
// replicasAmong(ids), in order.
func (p *Pass) positionsAmong(ids []string) []int {
	at := make([]int, 0, len(ids)+len(p.mine))
	find := p.cursor()
	for _, id := range ids {
		if i, ok := find.find(id); ok {
			at = append(at, i)
		}
	}
	for r := range p.mine {
		if i, ok := p.index.find(p.replicas, r.ID); ok && p.replicas[i] == r {
			at = append(at, i)
		}
	}
	slices.Sort(at)
	return slices.Compact(at)
}

// cursor finds the pass's replicas by id, ids that come mostly in the
// pass's order (sorted, and mostly runs of a service's) first just after
// the last one found, not by a search each.
type cursor struct {
	p    *Pass
	next int
}

func (p *Pass) cursor() *cursor { return &cursor{p: p, next: -1} }

// find is the position of the replica of id.
func (c *cursor) find(id string) (int, bool) {
	p := c.p
	i, ok := c.next, c.next >= 0 && c.next < p.index.sorted && p.replicas[c.next].ID == id
	if !ok {
		i, ok = p.index.find(p.replicas, id)
	}
	if ok {
		c.next = i + 1
	}
	return i, ok
}

// ownAt is own of the pass's replica at position i.
func (p *Pass) ownAt(i int) *api.Replica {
	if r := p.replicas[i]; p.mine[r] {
		return r
	}
	return takeCopy(p.replicas, i, p.mine)
}
