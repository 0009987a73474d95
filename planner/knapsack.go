package planner

import (
	"cmp"
	"slices"

	"github.com/gantry-dev/gantry/api"
)

// knapsackItem is one kind of replica a machine may take: its row's
// index, the worth of one, the room one takes, and how many at most.
type knapsackItem struct {
	index int
	value float64
	size  api.Resources
	most  int
}

// knapsackPick is how many of one item a solution takes.
type knapsackPick struct{ index, count int }

// knapsack is a branch and bound over items in order, each taken
// as many times as fit first; a branch is cut when even filling the room
// fractionally, in CPU or in memory alone, with the densest items left
// cannot beat the best found. Past its node limit it stops searching and
// keeps, for what it did not search, that same optimistic worth: the
// answer's ceiling stays true.
type knapsack struct {
	items []knapsackItem
	// byCPU and byMemory order the items by worth per unit of each.
	byCPU, byMemory []int
	limit, nodes    int
	current, best   []int
	bestValue       float64
	// unsearched is the most a branch left unsearched could be worth.
	unsearched float64
}

// knapsackResult is the most valuable choice found, its value, a ceiling
// no choice can pass (the value itself when the search finished), and the
// nodes the search took.
type knapsackResult struct {
	value   float64
	picks   []knapsackPick
	ceiling float64
	nodes   int
}

// solveKnapsack searches for the most valuable choice of items that fits
// in room, within limit nodes.
// Items are searched densest first when byDensity (worth per share of the
// room, in the resource they take most of: the greedy path is then close
// to the best, and the ceilings cut early), else worthiest first.
func solveKnapsack(items []knapsackItem, room api.Resources, limit int, byDensity bool) knapsackResult {
	share := func(it knapsackItem) float64 {
		if !byDensity {
			return 1
		}
		return max(float64(it.size.MilliCPU)/max(float64(room.MilliCPU), 1), float64(it.size.MemoryBytes)/max(float64(room.MemoryBytes), 1), 1e-12)
	}
	slices.SortStableFunc(items, func(a, b knapsackItem) int { return cmp.Compare(b.value/share(b), a.value/share(a)) })
	k := &knapsack{items: items, limit: limit, current: make([]int, len(items))}
	k.byCPU = densityOrder(items, func(r api.Resources) int64 { return r.MilliCPU })
	k.byMemory = densityOrder(items, func(r api.Resources) int64 { return r.MemoryBytes })
	k.search(0, 0, room)
	var picks []knapsackPick
	for at, n := range k.best {
		if n > 0 {
			picks = append(picks, knapsackPick{index: items[at].index, count: n})
		}
	}
	return knapsackResult{value: k.bestValue, picks: picks, ceiling: max(k.bestValue, k.unsearched), nodes: min(k.nodes, limit)}
}

// fractionalCeiling is the most the items could be worth in room: the
// root of solveKnapsack's search, without the search.
func fractionalCeiling(items []knapsackItem, room api.Resources) float64 {
	k := &knapsack{items: items}
	k.byCPU = densityOrder(items, func(r api.Resources) int64 { return r.MilliCPU })
	k.byMemory = densityOrder(items, func(r api.Resources) int64 { return r.MemoryBytes })
	return k.optimistic(0, room)
}

func densityOrder(items []knapsackItem, of func(api.Resources) int64) []int {
	order := make([]int, len(items))
	for i := range order {
		order[i] = i
	}
	density := func(i int) float64 { return items[i].value / float64(max(of(items[i].size), 1)) }
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(density(b), density(a)) })
	return order
}

func (k *knapsack) search(at int, value float64, room api.Resources) {
	if value > k.bestValue+1e-12 {
		k.bestValue, k.best = value, slices.Clone(k.current)
	}
	if at == len(k.items) {
		return
	}
	ceiling := value + k.optimistic(at, room)
	if ceiling <= k.bestValue+1e-12 {
		return
	}
	if k.nodes++; k.nodes > k.limit {
		k.unsearched = max(k.unsearched, ceiling)
		return
	}
	it := k.items[at]
	for n := fitting(it, room); n >= 0; n-- {
		k.current[at] = n
		k.search(at+1, value+float64(n)*it.value, room.Sub(times(it.size, n)))
	}
	k.current[at] = 0
}

// fitting is how many of the item the room takes.
func fitting(it knapsackItem, room api.Resources) int {
	n := it.most
	for _, d := range []struct{ need, free int64 }{
		{it.size.MilliCPU, room.MilliCPU}, {it.size.MemoryBytes, room.MemoryBytes},
		{it.size.EphemeralBytes, room.EphemeralBytes}, {int64(it.size.GPUs), int64(room.GPUs)},
	} {
		if d.need > 0 {
			n = min(n, int(d.free/d.need))
		}
	}
	return max(n, 0)
}

func times(r api.Resources, n int) api.Resources {
	k := int64(n)
	return api.Resources{MilliCPU: k * r.MilliCPU, MemoryBytes: k * r.MemoryBytes, EphemeralBytes: k * r.EphemeralBytes, GPUs: n * r.GPUs}
}

// optimistic is the most the items from at on could add: the smaller of
// the fractional fills of the room's CPU and of its memory.
func (k *knapsack) optimistic(at int, room api.Resources) float64 {
	return min(k.fractional(at, k.byCPU, float64(room.MilliCPU), func(r api.Resources) int64 { return r.MilliCPU }),
		k.fractional(at, k.byMemory, float64(room.MemoryBytes), func(r api.Resources) int64 { return r.MemoryBytes }))
}

func (k *knapsack) fractional(at int, order []int, room float64, of func(api.Resources) int64) float64 {
	total := 0.0
	for _, i := range order {
		if i < at {
			continue
		}
		it := k.items[i]
		size := float64(of(it.size)) * float64(it.most)
		if size <= room {
			total += it.value * float64(it.most)
			room -= size
			continue
		}
		return total + it.value*float64(it.most)*room/size
	}
	return total
}
