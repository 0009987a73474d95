package scheduler

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// A class's replicas come out in the order a sort by index and id gives,
// whether their indexes are dense, sparse, repeated or already in order.
func TestInIndexOrderIsASortByIndexAndID(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 3))
		n := 1 + rng.IntN(300)
		spread := []int{n, 2 * n, 10 * n, 3}[seed%4] // dense, gaps, sparse, repeats
		rs := make([]Replica, n)
		for i := range rs {
			index := rng.IntN(spread)
			if spread == n {
				index = i
			}
			rs[i] = Replica{ID: fmt.Sprintf("svc-%d-%d", index, i), Index: index}
		}
		rng.Shuffle(len(rs), func(i, j int) { rs[i], rs[j] = rs[j], rs[i] })
		if seed%7 == 0 {
			slices.SortFunc(rs, byIndexAndID)
		}
		want := slices.Clone(rs)
		slices.SortFunc(want, byIndexAndID)
		inIndexOrder(rs)
		if !slices.EqualFunc(rs, want, func(a, b Replica) bool { return a.ID == b.ID && a.Index == b.Index }) {
			t.Fatalf("seed %d: %v\nwant %v", seed, ids(rs), ids(want))
		}
	}
}

func ids(rs []Replica) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}
