package chunks

import (
	"cmp"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

type object struct{ key int }

func byKey(a, b *object) int { return cmp.Compare(a.key, b.key) }

func name(key int) string { return fmt.Sprint(key) }

// A list kept by Resorted through random rounds of changes is the sorted
// list of the objects, in chunks none empty nor over twice Size, and
// the lists before it are left as they were.
func TestResortedKeepsTheSortedList(t *testing.T) {
	for seed := uint64(1); seed <= 10; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0))
		objects := map[string]*object{}
		for range 3*Size + rng.IntN(Size) {
			k := rng.IntN(1 << 20)
			objects[name(k)] = &object{k}
		}
		list := Of(sortedBy(objects))
		for round := range 12 {
			before, kept := list, list.AppendTo(nil)
			dirty := changeSome(rng, objects, round)
			next, ok := Resorted(list, objects, dirty, byKey)
			if !ok {
				t.Fatalf("seed %d round %d: old versions not found where their order puts them", seed, round)
			}
			if got, want := next.AppendTo(nil), sortedBy(objects); !slices.Equal(got, want) {
				t.Fatalf("seed %d round %d: %d objects in the list, want the %d sorted", seed, round, len(got), len(want))
			}
			for i, c := range next {
				if len(c) == 0 || len(c) > 2*Size {
					t.Fatalf("seed %d round %d: chunk %d holds %d", seed, round, i, len(c))
				}
			}
			if !slices.Equal(before.AppendTo(nil), kept) {
				t.Fatalf("seed %d round %d: the list before the changes was changed", seed, round)
			}
			list = next
		}
	}
}

// changeSome changes objects: now a few anywhere, now many in one narrow
// range of keys (a chunk outgrows twice Size), now every one in a range
// (a chunk empties); it returns the changed ones' names with their old
// versions.
func changeSome(rng *rand.Rand, objects map[string]*object, round int) map[string]*object {
	dirty := map[string]*object{}
	touch := func(k int) {
		n := name(k)
		if _, seen := dirty[n]; !seen {
			dirty[n] = objects[n]
		}
	}
	switch round % 3 {
	case 0:
		for range rng.IntN(50) {
			k := rng.IntN(1 << 20)
			touch(k)
			if rng.IntN(3) == 0 {
				delete(objects, name(k))
			} else {
				objects[name(k)] = &object{k}
			}
		}
	case 1:
		from := rng.IntN(1 << 20)
		for k := from; k < from+2*Size+rng.IntN(Size); k++ {
			touch(k)
			objects[name(k)] = &object{k}
		}
	case 2:
		keys := slices.Sorted(func(yield func(int) bool) {
			for _, o := range objects {
				if !yield(o.key) {
					return
				}
			}
		})
		from := rng.IntN(len(keys))
		for _, k := range keys[from:min(len(keys), from+Size+rng.IntN(Size))] {
			touch(k)
			delete(objects, name(k))
		}
	}
	return dirty
}

func sortedBy(objects map[string]*object) []*object {
	return slices.SortedFunc(maps.Values(objects), byKey)
}

// Resorted refuses a list whose old version of a changed object is not
// where its order puts it, so that the caller sorts afresh.
func TestResortedRefusesAnOldVersionOutOfPlace(t *testing.T) {
	a, b := &object{1}, &object{2}
	list := Of([]*object{a, b})
	objects := map[string]*object{"1": a, "2": {2}}
	if _, ok := Resorted(list, objects, map[string]*object{"2": {2}}, byKey); ok {
		t.Fatal("an old version the list does not hold was taken")
	}
	if _, ok := Resorted(nil, objects, map[string]*object{"2": b}, byKey); ok {
		t.Fatal("an empty list was resorted")
	}
}

// Search and From find across chunks what a search of the whole list
// finds.
func TestSearchAndFromAcrossChunks(t *testing.T) {
	var all []*object
	for k := 0; k < 3*Size; k += 2 {
		all = append(all, &object{k})
	}
	list := Of(all)
	if len(list) < 2 {
		t.Fatalf("%d chunks, want several", len(list))
	}
	compare := func(o *object, k int) int { return cmp.Compare(o.key, k) }
	for _, k := range []int{-1, 0, 1, Size - 1, Size, Size + 1, 3*Size - 2, 3*Size - 1, 3 * Size} {
		o, found := Search(list, k, compare)
		i, want := slices.BinarySearchFunc(all, k, compare)
		if found != want || found && o != all[i] {
			t.Fatalf("Search(%d): %v %v, want %v", k, o, found, want)
		}
		if got := From(list, k, compare).AppendTo(nil); !slices.Equal(got, all[i:]) {
			t.Fatalf("From(%d): %d objects, want %d", k, len(got), len(all[i:]))
		}
	}
	if got := list.Len(); got != len(all) {
		t.Fatalf("Len %d, want %d", got, len(all))
	}
}
