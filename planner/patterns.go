package planner

import (
	"math"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/scheduler"
)

// Pattern packing suits shares of few request shapes (services of many
// identical replicas): it searches for the machine's fullest pattern — how
// many replicas of each shape one machine holds — among the replicas
// left, opens as many machines of that pattern as they allow, and repeats
// (the sequential heuristic of cutting stock). Greedy single-machine
// fills stop at the first shape that fits; the search weighs them all.

const (
	// maxPatternShapes bounds the distinct shapes packByPatterns takes.
	maxPatternShapes = 64
	// patternNodeLimit bounds one pattern's search; the best found so far
	// is used past it.
	patternNodeLimit = 20_000
)

// packByPatterns packs rs on machines of the allocatable size; ok is false
// when there are too many distinct shapes.
func packByPatterns(rs []scheduler.Replica, alloc api.Resources) (bins [][]int, misfits []int, ok bool) {
	groups, misfits, ok := groupByShape(rs, alloc, maxPatternShapes)
	if !ok {
		return nil, nil, false
	}
	for {
		pattern := fullestPattern(groups, alloc)
		if len(pattern) == 0 {
			return bins, misfits, true
		}
		uses := math.MaxInt
		for _, pick := range pattern {
			uses = min(uses, len(groups[pick.index].members)/pick.count)
		}
		for range uses {
			var bin []int
			for _, pick := range pattern {
				g := groups[pick.index]
				bin = append(bin, g.members[:pick.count]...)
				g.members = g.members[pick.count:]
			}
			bins = append(bins, bin)
		}
	}
}

// fullestPattern is how many of each group's replicas fill one empty
// machine most (CPU and memory relative to the machine, summed); empty
// when no replicas are left.
func fullestPattern(groups []*shapeGroup, alloc api.Resources) []knapsackPick {
	ac, am := math.Max(float64(alloc.MilliCPU), 1), math.Max(float64(alloc.MemoryBytes), 1)
	var items []knapsackItem
	for i, g := range groups {
		if len(g.members) > 0 {
			// A replica that asks for nothing is still worth taking.
			items = append(items, knapsackItem{index: i, value: 1e-9 + float64(g.req.MilliCPU)/ac + float64(g.req.MemoryBytes)/am,
				size: g.req, most: len(g.members)})
		}
	}
	return solveKnapsack(items, alloc, patternNodeLimit, false).picks
}
