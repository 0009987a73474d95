package scheduler

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
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

func ids(rs []Replica) []string { return idsOf(rs, func(r Replica) string { return r.ID }) }

func machineIDs(ms []*Machine) []string { return idsOf(ms, func(m *Machine) string { return m.ID }) }

func idsOf[T any](list []T, id func(T) string) []string {
	out := make([]string, len(list))
	for i, e := range list {
		out[i] = id(e)
	}
	return out
}

// A session orders its machines fullest first, ties by id, whether it is
// handed them by id (ties then go by position) or in any other order.
func TestSessionOrderIsByScoreThenID(t *testing.T) {
	for seed := range uint64(50) {
		rng := rand.New(rand.NewPCG(seed, 11))
		var byID []*Machine
		for i := range 1 + rng.IntN(200) {
			m := &Machine{ID: fmt.Sprintf("m-%04d", i), Cluster: "c", Runtimes: []string{RuntimeProcess}}
			m.Allocatable.MilliCPU, m.Allocatable.MemoryBytes = 4000, 8<<30
			m.Allocated.MilliCPU = int64(rng.IntN(4)) * 1000 // few levels: many ties
			byID = append(byID, m)
		}
		shuffled := make([]*Machine, len(byID))
		for i, m := range byID {
			shuffled[i] = m.Clone()
		}
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		got, want := machineIDs(NewSession(byID).Machines()), machineIDs(NewSession(shuffled).Machines())
		if !slices.Equal(got, want) {
			t.Fatalf("seed %d: handed by id %v\nshuffled %v", seed, got, want)
		}
		if !slices.IsSortedFunc(NewSession(shuffled).Machines(), func(a, b *Machine) int {
			return cmp.Or(cmp.Compare(packScore(b), packScore(a)), strings.Compare(a.ID, b.ID))
		}) {
			t.Fatalf("seed %d: not fullest first, then by id: %v", seed, want)
		}
	}
}
