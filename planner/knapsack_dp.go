package planner

import (
	"github.com/gantry-dev/gantry/api"
)

// When the room, counted in the items' grain (the greatest common divisor
// of their CPU sizes, and of their memory sizes), is a small grid, the
// knapsack is solved exactly by dynamic programming over it: a branch and
// bound cut short on a small machine crowded with kinds of replicas left
// a ceiling a quarter above any real configuration, and that ceiling kept
// the column generation from proving its bound.

// knapsackGridLimit bounds the dynamic program's work: grid cells times
// the items it takes one at a time (each kind split into powers of two).
const knapsackGridLimit = 8_000_000

// gridVisitsPerNode: the grid cell visits that cost about what one node
// of the branch and bound does (its ceilings walk every item), for the
// column generation's budget.
const gridVisitsPerNode = 50

// gridKnapsack is the item split the dynamic program takes one at a time:
// count copies of the kind at, as one.
type gridKnapsack struct {
	at, count int
	cpu, mem  int
	value     float64
}

// solveGridKnapsack solves the knapsack exactly on the grid; ok is false
// when it does not apply (an item asks for GPUs or ephemeral storage, or
// the grid is too large), and work is what it cost, in grid cell visits.
func solveGridKnapsack(items []knapsackItem, room api.Resources) (res knapsackResult, work int, ok bool) {
	var cpuGrain, memGrain int64
	for _, it := range items {
		if it.size.GPUs > 0 || it.size.EphemeralBytes > 0 {
			return knapsackResult{}, 0, false
		}
		cpuGrain, memGrain = gcd(cpuGrain, it.size.MilliCPU), gcd(memGrain, it.size.MemoryBytes)
	}
	if len(items) == 0 || cpuGrain == 0 || memGrain == 0 {
		return knapsackResult{}, 0, false
	}
	width, height := int(room.MilliCPU/cpuGrain)+1, int(room.MemoryBytes/memGrain)+1
	var pieces []gridKnapsack
	for at, it := range items {
		cpu, mem := int(it.size.MilliCPU/cpuGrain), int(it.size.MemoryBytes/memGrain)
		most := fitting(it, room)
		for count := 1; most > 0; count *= 2 {
			n := min(count, most)
			pieces = append(pieces, gridKnapsack{at: at, count: n, cpu: n * cpu, mem: n * mem, value: float64(n) * it.value})
			most -= n
		}
	}
	cells := width * height
	if cells*len(pieces) > knapsackGridLimit {
		return knapsackResult{}, 0, false
	}
	best := make([]float64, cells)
	took := make([]bool, cells*len(pieces)) // took[p*cells+c]: piece p is in cell c's best
	for p, pc := range pieces {
		for c := width - 1; c >= pc.cpu; c-- {
			for m := height - 1; m >= pc.mem; m-- {
				cell := c*height + m
				if v := best[cell-pc.cpu*height-pc.mem] + pc.value; v > best[cell]+1e-12 {
					best[cell] = v
					took[p*cells+cell] = true
				}
			}
		}
	}
	counts := make([]int, len(items))
	c, m := width-1, height-1
	for p := len(pieces) - 1; p >= 0; p-- {
		if took[p*cells+c*height+m] {
			counts[pieces[p].at] += pieces[p].count
			c, m = c-pieces[p].cpu, m-pieces[p].mem
		}
	}
	for at, n := range counts {
		if n > 0 {
			res.picks = append(res.picks, knapsackPick{index: items[at].index, count: n})
		}
	}
	res.value = best[cells-1]
	res.ceiling = res.value
	return res, cells * len(pieces), true
}
