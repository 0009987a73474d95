package planner

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/optimize/convex/lp"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/scheduler"
)

// The configuration bound is a stronger lower bound when replicas come in
// few shapes, or some services keep one replica per machine. The plain LP
// lets every machine fill to the brim; here a machine of type T is a
// configuration: how many replicas of each shape (at most one of a service
// that keeps apart) fit T, and the rest of T as room for the replicas not
// counted by shape. The LP buys configurations (Gilmore–Gomory, by column
// generation: a knapsack finds the configuration each type prices best)
// to cover every row's replica count and the rest's demand. A real plan's
// machines are configurations, so no plan costs less. The LP starts from
// the plan's own machines (its value is then at most the plan's cost, and
// the duals are sensible from the first round), and a type's knapsack is
// solved exactly on a grid when that is small (knapsack_dp.go): together
// they let the generation reach its end instead of tailing off. A service that keeps
// apart is taken at its smallest request in every resource, which keeps
// the bound valid when its replicas differ.

const (
	// configRowLimit: with more rows the knapsack could take too long;
	// shapes beyond it are left to the fluid rows, and with more services
	// that keep apart the plain bound is used alone.
	configRowLimit = 48
	// configRounds bounds the column generation; each round's duals,
	// scaled (Farley), give a valid bound on their own.
	configRounds = 60
	// configSearchTypes: each round, the knapsack is searched for the
	// types whose quick ceiling (the fractional fill) promises most; the
	// others' ceilings stand for them.
	configSearchTypes = 8
	// knapsackNodeLimit bounds one knapsack's search; past it the
	// search's ceiling stands for its answer (the bound stays valid,
	// only weaker).
	knapsackNodeLimit = 10_000
	// deepKnapsackNodeLimit is the limit of a search run again because
	// its ceiling alone kept the column generation going.
	deepKnapsackNodeLimit = 200_000
	// configNodeBudget bounds the knapsack nodes of the whole bound;
	// once spent, the ceilings stand for the searches.
	configNodeBudget = 10_000_000
	// configTolerance: the column generation stops once its bound is
	// within this fraction of the LP's value (all it could still prove).
	configTolerance = 0.001
	// configPlannedLimit: the plan's machines the LP starts from, the
	// most common configurations (a dense simplex over thousands of
	// distinct ones would take longer than the rounds they save).
	configPlannedLimit = 32
	// configsPerRound: the configurations worth most over their price
	// join the LP each round (more would only make it larger).
	configsPerRound = 16
)

// configRow counts replicas: those of one apart group (apartGroup), or
// those of one request shape.
type configRow struct {
	count int
	least api.Resources
	apart bool
}

// configurationBound is the bound above for the replicas rs of the
// cluster; ok is false when it would be the plain bound. The plan's
// machines (planned) are its first configurations. It stops once the LP
// is known not to pass plain or the bound already in hand by more than
// configTolerance.
func (p *planning) configurationBound(cluster string, rs []scheduler.Replica, planned []plannedMachine, plain float64) (float64, bool) {
	rows, rowOf, rest := configRows(rs)
	if len(rows) == 0 {
		return 0, false
	}
	cg := newConfigLP(rows, rest, p.typeColumns(cluster))
	if cg == nil {
		return 0, false
	}
	cg.addPlanned(planned, rowOf)
	best := 0.0
	for range configRounds {
		value, duals, ok := cg.solveDual()
		if !ok {
			break
		}
		if value <= math.Max(plain, best)*(1+configTolerance) {
			// More configurations only lower the LP's value: the bound
			// in hand is all but what it could still prove.
			break
		}
		theta, added := cg.generate(duals)
		// Scaled by the most any configuration's worth passes its price,
		// the duals are feasible for every configuration: a valid bound
		// each round (the LP's value once none passes).
		best = math.Max(best, value/math.Max(theta, 1))
		if theta <= 1+1e-9 || !added {
			break
		}
	}
	return best, best > 0
}

// configRows: a row per apart group, then a row per shape of
// the other replicas if that keeps the rows within configRowLimit; what is
// not counted by a row is summed in rest. rowOf is each replica's row (-1
// for none).
func configRows(rs []scheduler.Replica) (rows []configRow, rowOf []int, rest api.Resources) {
	apart := map[string]int{}
	shapes := map[api.Resources]int{}
	var shaped []configRow
	rowOf, shapeOf := make([]int, len(rs)), make([]int, len(rs))
	for k, r := range rs {
		rowOf[k], shapeOf[k] = -1, -1
		if g := apartGroup(&r); g != "" {
			i, ok := apart[g]
			if !ok {
				i = len(rows)
				apart[g] = i
				rows = append(rows, configRow{least: r.Requests, apart: true})
			}
			rows[i].count++
			rows[i].least = minResources(rows[i].least, r.Requests)
			rowOf[k] = i
			continue
		}
		rest = rest.Add(r.Requests)
		if len(shaped) > configRowLimit {
			continue // too many shapes for rows: rest counts them
		}
		i, ok := shapes[r.Requests]
		if !ok {
			i = len(shaped)
			shapes[r.Requests] = i
			shaped = append(shaped, configRow{least: r.Requests})
		}
		shaped[i].count++
		shapeOf[k] = i
	}
	switch {
	case len(rows) > configRowLimit:
		return nil, nil, api.Resources{}
	case len(rows)+len(shaped) > configRowLimit:
		return rows, rowOf, rest
	}
	for k, i := range shapeOf {
		if i >= 0 {
			rowOf[k] = len(rows) + i
		}
	}
	return append(rows, shaped...), rowOf, api.Resources{}
}

// configLP is the configuration LP's rows (the counted ones, then one per
// resource the rest needs) and the configurations found so far.
type configLP struct {
	rows []configRow
	dims []func(api.Resources) float64
	need []float64
	cols []column
	// configuration j covers supply[j] of every row for price[j].
	supply [][]float64
	price  []float64
	// budget is the knapsack nodes left to search.
	budget int
	// first counts the configurations the LP starts with.
	first int
}

func newConfigLP(rows []configRow, rest api.Resources, cols []column) *configLP {
	cg := &configLP{rows: rows, cols: cols, budget: configNodeBudget}
	for _, r := range rows {
		cg.need = append(cg.need, float64(r.count))
	}
	for _, d := range resourceDims {
		if d(rest) > 0 {
			cg.dims = append(cg.dims, d)
			cg.need = append(cg.need, d(rest))
		}
	}
	if len(cg.dims) > 0 {
		for _, c := range cols {
			cg.add(c, nil)
		}
	}
	// One replica of each row alone on the cheapest type that holds it:
	// the first configurations, so that every row can be covered.
	for i, r := range rows {
		cheapest := -1
		for j, c := range cols {
			if c.alloc.Fits(r.least) && (cheapest < 0 || c.price < cols[cheapest].price) {
				cheapest = j
			}
		}
		if cheapest < 0 {
			return nil
		}
		cg.add(cols[cheapest], []knapsackPick{{index: i, count: 1}})
	}
	cg.first = len(cg.supply)
	return cg
}

// addPlanned adds the plan's own machines as configurations, the most
// common first and at most configPlannedLimit of them: the LP starts at
// about the plan's cost, not at a replica per machine, and its duals make
// sense from the first round.
func (cg *configLP) addPlanned(planned []plannedMachine, rowOf []int) {
	col := map[string]int{}
	for j, c := range cg.cols {
		col[c.name] = j
	}
	type config struct {
		col   int
		picks []knapsackPick
		times int
	}
	var configs []*config
	byKey := map[string]*config{}
	for _, m := range planned {
		j, ok := col[m.itype]
		if !ok {
			continue
		}
		counts := make([]int, len(cg.rows))
		for _, k := range m.replicas {
			if rowOf[k] >= 0 {
				counts[rowOf[k]]++
			}
		}
		var picks []knapsackPick
		for i, n := range counts {
			if n > 0 {
				picks = append(picks, knapsackPick{index: i, count: n})
			}
		}
		key := fmt.Sprint(j, picks)
		if c, ok := byKey[key]; ok {
			c.times++
			continue
		}
		if cg.cols[j].alloc.Fits(cg.used(picks)) {
			byKey[key] = &config{col: j, picks: picks, times: 1}
			configs = append(configs, byKey[key])
		}
	}
	slices.SortStableFunc(configs, func(a, b *config) int { return cmp.Compare(b.times, a.times) })
	for i, c := range configs[:min(len(configs), configPlannedLimit)] {
		cg.add(cg.cols[c.col], c.picks)
		// Many machines of a plan are nearly alike, and gonum's simplex
		// met a singular basis among them; a discount of its own for each
		// breaks the ties. A cheaper configuration only lowers the LP's
		// value: the bound stays valid.
		cg.price[len(cg.price)-1] *= 1 - 1e-7*float64(i+1)
	}
}

// used is what the picks take of a machine, each replica at its row's least.
func (cg *configLP) used(picks []knapsackPick) api.Resources {
	var used api.Resources
	for _, pick := range picks {
		used = used.Add(times(cg.rows[pick.index].least, pick.count))
	}
	return used
}

// add records the configuration of the column's type holding the picks.
func (cg *configLP) add(c column, picks []knapsackPick) {
	supply := make([]float64, len(cg.need))
	for _, pick := range picks {
		supply[pick.index] = float64(pick.count)
	}
	used := cg.used(picks)
	for k, d := range cg.dims {
		supply[len(cg.rows)+k] = math.Max(0, d(c.alloc)-d(used))
	}
	cg.supply = append(cg.supply, supply)
	cg.price = append(cg.price, c.price)
}

// solveDual solves the restricted LP's dual — the most the rows' worth can
// add up to with no configuration worth more than its price — and returns
// its value and each row's worth per unit.
func (cg *configLP) solveDual() (float64, []float64, bool) {
	rows, configs := len(cg.need), len(cg.supply)
	a := mat.NewDense(configs, rows+configs, nil)
	c := make([]float64, rows+configs)
	for r := range rows {
		c[r] = -1 // worth scaled by the row's need: maximise their sum
	}
	for j := range configs {
		for r := range rows {
			a.Set(j, r, cg.supply[j][r]/cg.need[r])
		}
		a.Set(j, rows+j, 1)
	}
	slacks := make([]int, configs) // a feasible first basis: no row worth anything
	for j := range slacks {
		slacks[j] = rows + j
	}
	value, y, err := lp.Simplex(c, a, cg.price, 1e-10, slacks)
	if err != nil {
		return 0, nil, false
	}
	duals := make([]float64, rows)
	for r := range rows {
		duals[r] = y[r] / cg.need[r]
	}
	cg.dropSlack(duals)
	return -value, duals, true
}

// dropSlack forgets the generated configurations worth less than their
// price under the duals (the LP buys none of them), which keeps the LP
// small; the first ones stay, so that every row can still be covered.
// Dropping them never makes the bound invalid: each round's is checked
// against every configuration the knapsack can make.
func (cg *configLP) dropSlack(duals []float64) {
	kept := cg.first
	for j := cg.first; j < len(cg.supply); j++ {
		worth := 0.0
		for r, v := range cg.supply[j] {
			worth += v * duals[r]
		}
		if worth >= cg.price[j]*(1-1e-9) {
			cg.supply[kept], cg.price[kept] = cg.supply[j], cg.price[j]
			kept++
		}
	}
	cg.supply, cg.price = cg.supply[:kept], cg.price[:kept]
}

// generate prices the configurations under the duals: each type's quick
// ceiling first, then a knapsack search for the most promising types. It
// adds the few configurations found worth most over their price, and
// returns the largest ratio of worth to price any configuration could
// reach (a ceiling where no search was run or a search was cut short).
func (cg *configLP) generate(duals []float64) (float64, bool) {
	type typePricing struct {
		col   column
		base  float64
		items []knapsackItem
		ratio float64 // ceiling over price
	}
	pricings := make([]typePricing, len(cg.cols))
	for i, c := range cg.cols {
		base, items := cg.knapsackFor(c, duals)
		pricings[i] = typePricing{col: c, base: base, items: items, ratio: (base + fractionalCeiling(items, c.alloc)) / c.price}
	}
	slices.SortStableFunc(pricings, func(a, b typePricing) int { return cmp.Compare(b.ratio, a.ratio) })
	type found struct {
		col   column
		picks []knapsackPick
		ratio float64
	}
	var better []found
	theta := 0.0
	type cutSearch struct {
		typePricing
		ceiling float64
	}
	var cut []cutSearch // searches cut short whose ceiling passes the price
	for i, tp := range pricings {
		// Search the most promising types, and on down while none of
		// them gave a configuration worth more than its price.
		if tp.ratio <= 1+1e-9 || cg.budget <= 0 || (i >= configSearchTypes && len(better) > 0) {
			theta = math.Max(theta, tp.ratio)
			continue
		}
		res := cg.search(tp.items, tp.col.alloc, knapsackNodeLimit)
		ceiling := (tp.base + res.ceiling) / tp.col.price
		if ratio := (tp.base + res.value) / tp.col.price; ratio > 1+1e-9 {
			better = append(better, found{tp.col, res.picks, ratio})
		} else if ceiling > 1+1e-9 {
			cut = append(cut, cutSearch{tp, ceiling})
			continue
		}
		theta = math.Max(theta, ceiling)
	}
	for _, tp := range cut {
		if len(better) > 0 {
			theta = math.Max(theta, tp.ceiling)
			continue
		}
		// Nothing better found: search deeper before a cut search's
		// loose ceiling keeps the LP from its end.
		res := cg.search(tp.items, tp.col.alloc, deepKnapsackNodeLimit)
		theta = math.Max(theta, (tp.base+res.ceiling)/tp.col.price)
		if ratio := (tp.base + res.value) / tp.col.price; ratio > 1+1e-9 {
			better = append(better, found{tp.col, res.picks, ratio})
		}
	}
	slices.SortStableFunc(better, func(a, b found) int { return cmp.Compare(b.ratio, a.ratio) })
	for _, f := range better[:min(len(better), configsPerRound)] {
		cg.add(f.col, f.picks)
	}
	return theta, len(better) > 0
}

// search runs one knapsack search within the limit and the budget left.
func (cg *configLP) search(items []knapsackItem, room api.Resources, limit int) knapsackResult {
	if res, visits, ok := solveGridKnapsack(items, room); ok {
		cg.budget -= visits / gridVisitsPerNode
		return res
	}
	res := solveKnapsack(items, room, min(limit, cg.budget), true)
	cg.budget -= res.nodes
	return res
}

// knapsackFor is the knapsack a type's pricing solves: the room is worth
// the rest's rows per unit (base), each replica its own row less the room
// it takes.
func (cg *configLP) knapsackFor(c column, duals []float64) (base float64, items []knapsackItem) {
	for k, d := range cg.dims {
		base += duals[len(cg.rows)+k] * d(c.alloc)
	}
	for i, r := range cg.rows {
		v := duals[i]
		for k, d := range cg.dims {
			v -= duals[len(cg.rows)+k] * math.Min(d(r.least), d(c.alloc))
		}
		most := r.count
		if r.apart {
			most = 1
		}
		if v > 1e-12 && c.alloc.Fits(r.least) {
			items = append(items, knapsackItem{index: i, value: v, size: r.least, most: most})
		}
	}
	return base, items
}
