// Package chunks keeps a long sorted list as a list of sorted chunks
// that are never changed once made: a few changes among 500,000 objects
// make new copies of the chunks they fall in and of the short list of
// chunks, not of the whole list, so what a change leaves for the
// collector is a few chunks, not megabytes.
package chunks

import (
	"encoding/json"
	"slices"
)

// Size is how many objects a chunk holds when a list is cut afresh; a
// chunk changes are merged into splits when it outgrows twice that.
const Size = 4096

// List is a sorted list in chunks, none empty, each sorted and each
// after the one before. Readers may share it: nothing changes a chunk.
type List[T any] [][]*T

// Of cuts a sorted list into chunks (sharing its memory).
func Of[T any](sorted []*T) List[T] {
	out := make(List[T], 0, (len(sorted)+Size-1)/Size)
	for len(sorted) > 0 {
		n := min(Size, len(sorted))
		out = append(out, slices.Clip(sorted[:n]))
		sorted = sorted[n:]
	}
	return out
}

// MarshalJSON writes the list as one array, as the list it stands for.
func (l List[T]) MarshalJSON() ([]byte, error) {
	return json.Marshal(l.AppendTo(make([]*T, 0, l.Len())))
}

// Len is how many objects the list holds.
func (l List[T]) Len() int {
	n := 0
	for _, c := range l {
		n += len(c)
	}
	return n
}

// AppendTo appends the list's objects, in order, to dst.
func (l List[T]) AppendTo(dst []*T) []*T {
	for _, c := range l {
		dst = append(dst, c...)
	}
	return dst
}

// All yields the objects in order.
func (l List[T]) All(yield func(*T) bool) {
	for _, c := range l {
		for _, o := range c {
			if !yield(o) {
				return
			}
		}
	}
}

// From is the list from the first object at or after key, as cmp
// compares an object with the key.
func From[T, K any](l List[T], key K, cmp func(*T, K) int) List[T] {
	i := chunkOf(l, key, cmp)
	if i == len(l) {
		return nil
	}
	k, _ := slices.BinarySearchFunc(l[i], key, cmp)
	if k == 0 {
		return l[i:]
	}
	return append(List[T]{l[i][k:]}, l[i+1:]...)
}

// Search finds the object cmp says equals key.
func Search[T, K any](l List[T], key K, cmp func(*T, K) int) (*T, bool) {
	i := chunkOf(l, key, cmp)
	if i == len(l) {
		return nil, false
	}
	if k, ok := slices.BinarySearchFunc(l[i], key, cmp); ok {
		return l[i][k], true
	}
	return nil, false
}

// chunkOf is the first chunk whose last object is at or after key
// (len(l): none).
func chunkOf[T, K any](l List[T], key K, cmp func(*T, K) int) int {
	i, _ := slices.BinarySearchFunc(l, key, func(c []*T, key K) int { return cmp(c[len(c)-1], key) })
	return i
}

// Resorted is the list after the objects dirty names changed: dirty
// holds each one's version in old (nil: it was not there), objects every
// object's present version (absent: gone). The chunks the changes fall
// in are made anew, the others shared. ok is false when an old version
// is not where its order puts it; the caller then sorts afresh.
func Resorted[T any](old List[T], objects map[string]*T, dirty map[string]*T, compare func(a, b *T) int) (l List[T], ok bool) {
	if len(old) == 0 {
		return nil, false
	}
	drops := map[int][]int{}
	adds := map[int][]*T{}
	for name, was := range dirty {
		if was != nil {
			i := chunkOf(old, was, compare)
			if i == len(old) {
				return nil, false
			}
			k, found := slices.BinarySearchFunc(old[i], was, compare)
			if !found || old[i][k] != was {
				return nil, false
			}
			drops[i] = append(drops[i], k)
		}
		if o, present := objects[name]; present {
			i := min(chunkOf(old, o, compare), len(old)-1)
			adds[i] = append(adds[i], o)
		}
	}
	out := make(List[T], 0, len(old)+len(adds))
	for i, c := range old {
		if drops[i] == nil && adds[i] == nil {
			out = append(out, c)
			continue
		}
		out = appendSplit(out, merged(c, drops[i], adds[i], compare))
	}
	return out, true
}

// merged is chunk c without the objects at drop, with add, sorted.
func merged[T any](c []*T, drop []int, add []*T, compare func(a, b *T) int) []*T {
	slices.Sort(drop)
	slices.SortFunc(add, compare)
	out := make([]*T, 0, len(c)-len(drop)+len(add))
	for i, o := range c {
		if len(drop) > 0 && drop[0] == i {
			drop = drop[1:]
			continue
		}
		for len(add) > 0 && compare(add[0], o) < 0 {
			out, add = append(out, add[0]), add[1:]
		}
		out = append(out, o)
	}
	return append(out, add...)
}

// appendSplit appends c to l as one chunk, or as several when it has
// outgrown twice Size; an empty one not at all.
func appendSplit[T any](l List[T], c []*T) List[T] {
	for len(c) > 2*Size {
		l, c = append(l, slices.Clip(c[:Size])), c[Size:]
	}
	if len(c) == 0 {
		return l
	}
	return append(l, c)
}
