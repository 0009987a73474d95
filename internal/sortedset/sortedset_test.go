package sortedset

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// A seeded run of adds and removes: after each round, the set lists what
// sorting its members lists, and a list handed out earlier is unchanged.
func TestSortedIsTheMembersSorted(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0))
		set, want := New(), map[string]bool{}
		var handed [][]string
		var copies [][]string
		for round := 0; round < 50; round++ {
			for op := rng.IntN(40); op > 0; op-- {
				s := fmt.Sprintf("web-%d", rng.IntN(60))
				if rng.IntN(2) == 0 {
					set.Add(s)
					want[s] = true
				} else {
					set.Remove(s)
					delete(want, s)
				}
			}
			got := set.Sorted()
			if exp := slices.Sorted(maps.Keys(want)); got == nil || !slices.Equal(got, exp) || set.Len() != len(want) {
				t.Fatalf("seed %d round %d: sorted %v (len %d), want %v", seed, round, got, set.Len(), exp)
			}
			handed, copies = append(handed, got), append(copies, slices.Clone(got))
		}
		for i := range handed {
			if !slices.Equal(handed[i], copies[i]) {
				t.Fatalf("seed %d: a list handed out in round %d changed: %v, was %v", seed, i, handed[i], copies[i])
			}
		}
	}
}

func BenchmarkSortedAfterAFewChanges(b *testing.B) {
	set := New()
	for i := range 60000 {
		set.Add(fmt.Sprintf("svc-%02d-%d", i%40, i))
	}
	set.Sorted()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := range 2000 {
			id := fmt.Sprintf("svc-%02d-%d", k%40, (i*2000+k)%60000)
			set.Remove(id)
			set.Add(id + "x")
		}
		set.Sorted()
	}
}

func BenchmarkSortAfterAFewChanges(b *testing.B) {
	set := map[string]bool{}
	for i := range 60000 {
		set[fmt.Sprintf("svc-%02d-%d", i%40, i)] = true
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := range 2000 {
			id := fmt.Sprintf("svc-%02d-%d", k%40, (i*2000+k)%60000)
			delete(set, id)
			set[id+"x"] = true
		}
		_ = slices.Sorted(maps.Keys(set))
	}
}
