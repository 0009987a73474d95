package view

import (
	"cmp"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

type item struct{ name, group string }

func byGroupThenName(a, b *item) int {
	return cmp.Or(cmp.Compare(a.group, b.group), cmp.Compare(a.name, b.name))
}

// A list brought up to a few changes by merging is the list a full sort
// of the objects makes: for random additions, replacements (which may
// move an object in the order) and removals.
func TestResortedMergesChangesAsAFullSortWould(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 7))
		objects := map[string]*item{}
		for i := range 50 + rng.IntN(200) {
			name := fmt.Sprintf("o%03d", i)
			objects[name] = &item{name: name, group: fmt.Sprint(rng.IntN(5))}
		}
		old := sortedBy(objects, byGroupThenName)
		before := slices.Clone(old)
		dirty := map[string]*item{}
		for range 1 + rng.IntN(len(objects)/5) {
			name := fmt.Sprintf("o%03d", rng.IntN(len(objects)+20))
			if _, seen := dirty[name]; !seen {
				dirty[name] = objects[name] // the version in old
			}
			switch rng.IntN(3) {
			case 0:
				delete(objects, name)
			default:
				objects[name] = &item{name: name, group: fmt.Sprint(rng.IntN(5))}
			}
		}
		got := resorted(old, objects, dirty, byGroupThenName)
		want := sortedBy(objects, byGroupThenName)
		if !slices.Equal(got, want) {
			t.Fatalf("seed %d: merged %v, sorted %v", seed, names(got), names(want))
		}
		if !slices.Equal(old, before) {
			t.Fatalf("seed %d: the old list changed", seed)
		}
		if len(got) != len(slices.Collect(maps.Keys(objects))) {
			t.Fatalf("seed %d: %d objects listed, %d held", seed, len(got), len(objects))
		}
	}
}

func names(list []*item) []string {
	out := make([]string, len(list))
	for i, o := range list {
		out[i] = o.name
	}
	return out
}
