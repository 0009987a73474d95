package sim

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
)

// keyed is an item a stable sort must keep in order among equal keys.
type keyed struct{ key, at int }

func TestMergeAppendedSortsAsAStableSortDoes(t *testing.T) {
	rng := rand.New(rand.NewPCG(33, 1))
	byKey := func(a, b keyed) int { return cmp.Compare(a.key, b.key) }
	for round := range 2000 {
		var list []keyed // sorted, then made items appended, merged with a few more than those
		for range rng.IntN(40) {
			list = append(list, keyed{key: rng.IntN(30)})
		}
		slices.SortStableFunc(list, byKey)
		made := rng.IntN(8)
		for range made {
			list = append(list, keyed{key: rng.IntN(30)})
		}
		for i := range list {
			list[i].at = i
		}
		want := slices.Clone(list)
		slices.SortStableFunc(want, byKey)
		if got := mergeAppended(list, made+rng.IntN(3), byKey); !slices.Equal(got, want) {
			t.Fatalf("round %d: merged %v, a stable sort gives %v", round, got, want)
		}
	}
}
