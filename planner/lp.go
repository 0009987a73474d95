package planner

import (
	"math"

	"github.com/gantry-dev/gantry/api"
)

// lowerBound is, per cluster, the LP relaxation of buying capacity for the
// demand the plan put on new machines: fractional machines of any allowed
// instance type at its cheapest allowed offering, covering the total CPU,
// memory, ephemeral storage and GPUs. No real plan can cost less.
func (p *planning) lowerBound(plan *Plan) float64 {
	requests := map[string]api.Resources{}
	for _, r := range p.in.Pending {
		requests[r.ID] = r.Requests
	}
	gpus := map[string]int{}
	for _, pl := range plan.Placements {
		gpus[pl.Replica] = len(pl.GPUs)
	}
	demand := map[string]api.Resources{}
	for _, nm := range plan.Add {
		for _, id := range nm.Replicas {
			d := demand[nm.Cluster].Add(requests[id])
			d.GPUs += gpus[id]
			demand[nm.Cluster] = d
		}
	}
	total := 0.0
	for cluster, d := range demand {
		total += lpMinCost(d, p.typeColumns(cluster))
	}
	return total
}

type column struct {
	alloc api.Resources
	price float64
}

// typeColumns: per instance type, the most generous allocatable and the
// cheapest allowed offering price (both keep the bound valid).
func (p *planning) typeColumns(cluster string) []column {
	byType := map[string]*column{}
	var order []string
	for _, c := range p.catalog.plain[cluster] {
		col, ok := byType[c.itype.Name]
		if !ok {
			col = &column{alloc: c.alloc, price: c.offering.PricePerHour}
			byType[c.itype.Name] = col
			order = append(order, c.itype.Name)
			continue
		}
		col.price = math.Min(col.price, c.offering.PricePerHour)
		col.alloc = api.Resources{MilliCPU: max(col.alloc.MilliCPU, c.alloc.MilliCPU), MemoryBytes: max(col.alloc.MemoryBytes, c.alloc.MemoryBytes),
			EphemeralBytes: max(col.alloc.EphemeralBytes, c.alloc.EphemeralBytes), GPUs: max(col.alloc.GPUs, c.alloc.GPUs)}
	}
	out := make([]column, len(order))
	for i, name := range order {
		out[i] = *byType[name]
	}
	return out
}

// lpMinCost solves min Σ price·x subject to Σ alloc·x ≥ demand, x ≥ 0,
// through its dual, max demand·y subject to alloc·y ≤ price, y ≥ 0, whose
// origin is feasible (prices are ≥ 0): a small dense simplex with Bland's
// rule. Each dimension is scaled by its demand for numerical sanity.
func lpMinCost(demand api.Resources, cols []column) float64 {
	dims := []func(api.Resources) float64{
		func(r api.Resources) float64 { return float64(r.MilliCPU) },
		func(r api.Resources) float64 { return float64(r.MemoryBytes) },
		func(r api.Resources) float64 { return float64(r.EphemeralBytes) },
		func(r api.Resources) float64 { return float64(r.GPUs) },
	}
	var active []func(api.Resources) float64
	for _, d := range dims {
		if d(demand) > 0 {
			active = append(active, d)
		}
	}
	n, m := len(active), len(cols)
	if n == 0 || m == 0 {
		return 0
	}
	// Tableau rows: one per column (constraint), plus the objective row.
	width := n + m + 1
	t := make([][]float64, m+1)
	for i, c := range cols {
		row := make([]float64, width)
		for j, d := range active {
			row[j] = d(c.alloc) / d(demand)
		}
		row[n+i] = 1
		row[width-1] = c.price
		t[i] = row
	}
	obj := make([]float64, width)
	for j := range active {
		obj[j] = -1 // maximize Σ y_j (demand scaled to 1)
	}
	t[m] = obj
	for iter := 0; iter < 10*(m+n); iter++ {
		enter := -1
		for j := 0; j < width-1; j++ {
			if t[m][j] < -1e-12 {
				enter = j
				break
			}
		}
		if enter < 0 {
			return t[m][width-1]
		}
		leave, best := -1, math.Inf(1)
		for i := 0; i < m; i++ {
			if t[i][enter] > 1e-12 {
				if ratio := t[i][width-1] / t[i][enter]; ratio < best-1e-15 {
					leave, best = i, ratio
				}
			}
		}
		if leave < 0 {
			return math.Inf(1) // dual unbounded: no mix of types covers the demand
		}
		pivot(t, leave, enter)
	}
	return t[m][width-1]
}

func pivot(t [][]float64, row, col int) {
	pv := t[row][col]
	for j := range t[row] {
		t[row][j] /= pv
	}
	for i := range t {
		if i == row || t[i][col] == 0 {
			continue
		}
		f := t[i][col]
		for j := range t[i] {
			t[i][j] -= f * t[row][j]
		}
	}
}
