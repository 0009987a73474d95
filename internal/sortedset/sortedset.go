// Package sortedset keeps a set of strings that hands out its members
// sorted, merging what changed since it last did into the list it handed
// out then, instead of sorting every member again: a fleet's launch has
// tens of thousands of replicas waiting, listed sorted for every pass,
// of which a pass changes a few thousand.
package sortedset

import (
	"maps"
	"slices"
)

// Set is a set of strings. The zero Set is not ready: use New.
type Set struct {
	members map[string]bool
	// sorted is the list last handed out (shared with its holders: never
	// changed); added and removed are the changes since.
	sorted         []string
	added, removed map[string]bool
}

// New returns an empty Set.
func New() *Set {
	return &Set{members: map[string]bool{}, sorted: []string{}, added: map[string]bool{}, removed: map[string]bool{}}
}

// Add puts s in the set.
func (set *Set) Add(s string) {
	if set.members[s] {
		return
	}
	set.members[s] = true
	if set.removed[s] {
		delete(set.removed, s)
	} else {
		set.added[s] = true
	}
}

// Remove takes s out of the set.
func (set *Set) Remove(s string) {
	if !set.members[s] {
		return
	}
	delete(set.members, s)
	if set.added[s] {
		delete(set.added, s)
	} else {
		set.removed[s] = true
	}
}

// Len is how many members the set has.
func (set *Set) Len() int { return len(set.members) }

// Sorted is the members, sorted, never nil. The list is shared with
// every caller until the set changes: it must not be changed.
func (set *Set) Sorted() []string {
	if len(set.added)+len(set.removed) == 0 {
		return set.sorted
	}
	adds := slices.Sorted(maps.Keys(set.added))
	out := make([]string, 0, len(set.members))
	i := 0
	for _, s := range set.sorted {
		if set.removed[s] {
			continue
		}
		for i < len(adds) && adds[i] < s {
			out = append(out, adds[i])
			i++
		}
		out = append(out, s)
	}
	out = append(out, adds[i:]...)
	set.sorted = out
	clear(set.added)
	clear(set.removed)
	return out
}
