package planner

import (
	"math"
	"slices"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/optimize/convex/lp"

	"github.com/gantry-dev/gantry/api"
)

type column struct {
	name  string
	zone  string // for per-zone columns
	alloc api.Resources
	price float64
}

// typeColumns: per instance type, the most generous allocatable and the
// cheapest allowed offering price (both keep the bound valid).
func (p *planning) typeColumns(cluster string) []column { return p.columns(cluster, false) }

// columns merges the cluster's offerings per instance type (and per zone,
// when perZone): the most generous allocatable, the cheapest price.
func (p *planning) columns(cluster string, perZone bool) []column {
	byKey := map[string]*column{}
	var order []string
	for _, c := range p.catalog.plain[cluster] {
		key, zone := c.itype.Name, ""
		if perZone {
			key, zone = c.itype.Name+"|"+c.offering.Zone, c.offering.Zone
		}
		col, ok := byKey[key]
		if !ok {
			byKey[key] = &column{name: c.itype.Name, zone: zone, alloc: c.alloc, price: c.offering.PricePerHour}
			order = append(order, key)
			continue
		}
		col.price = math.Min(col.price, c.offering.PricePerHour)
		col.alloc = maxResources(col.alloc, c.alloc)
	}
	out := make([]column, len(order))
	for i, key := range order {
		out[i] = *byKey[key]
	}
	return out
}

// lpMinCost is the cheapest fractional mix of cols covering the demand.
func lpMinCost(demand api.Resources, cols []column) float64 {
	cost, _ := lpSolve(demand, cols)
	return cost
}

// lpSolve is lpMinCost with the optimal mix: machines[i] is how many
// (fractional) machines of cols[i] the relaxation buys.
func lpSolve(demand api.Resources, cols []column) (float64, []float64) {
	var need []float64
	var dims []func(api.Resources) float64
	for _, d := range resourceDims {
		if d(demand) > 0 {
			need, dims = append(need, d(demand)), append(dims, d)
		}
	}
	supply := make([][]float64, len(cols))
	prices := make([]float64, len(cols))
	for i, c := range cols {
		for _, d := range dims {
			supply[i] = append(supply[i], d(c.alloc))
		}
		prices[i] = c.price
	}
	return coverLP(need, supply, prices)
}

var resourceDims = []func(api.Resources) float64{
	func(r api.Resources) float64 { return float64(r.MilliCPU) },
	func(r api.Resources) float64 { return float64(r.MemoryBytes) },
	func(r api.Resources) float64 { return float64(r.EphemeralBytes) },
	func(r api.Resources) float64 { return float64(r.GPUs) },
}

// coverLP solves min Σ price[j]·x[j] subject to Σ supply[j][r]·x[j] ≥
// need[r] for every row r, x ≥ 0 (all data ≥ 0, need > 0), with gonum's
// simplex in standard form (a surplus variable per row). Each row is
// scaled by its need for numerical sanity. It returns +Inf when no mix
// of columns covers the need.
func coverLP(need []float64, supply [][]float64, price []float64) (float64, []float64) {
	// A column that supplies nothing never helps a cover, and gonum's
	// simplex refuses a matrix with a column of zeros (a type floored to
	// nothing by the request grain made the bound +Inf).
	var useful []int
	for j, s := range supply {
		if slices.ContainsFunc(s, func(v float64) bool { return v != 0 }) {
			useful = append(useful, j)
		}
	}
	n, m := len(need), len(useful)
	if n == 0 || len(supply) == 0 {
		return 0, nil
	}
	if m == 0 {
		return math.Inf(1), nil
	}
	a := mat.NewDense(n, m+n, nil)
	b := make([]float64, n)
	c := make([]float64, m+n)
	for r := range need {
		b[r] = 1
		for k, j := range useful {
			a.Set(r, k, supply[j][r]/need[r])
		}
		a.Set(r, m+r, -1)
	}
	for k, j := range useful {
		c[k] = price[j]
	}
	cost, x, err := lp.Simplex(c, a, b, 1e-10, nil)
	if err != nil {
		return math.Inf(1), nil
	}
	machines := make([]float64, len(supply))
	for k, j := range useful {
		machines[j] = x[k]
	}
	return cost, machines
}
