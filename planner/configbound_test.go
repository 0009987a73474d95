package planner

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gantry-dev/gantry/api"
)

// bruteKnapsack tries every count of every item.
func bruteKnapsack(items []knapsackItem, room api.Resources, at int) float64 {
	if at == len(items) {
		return 0
	}
	best := 0.0
	for n := 0; n <= items[at].most; n++ {
		taken := times(items[at].size, n)
		if !room.Fits(taken) {
			break
		}
		best = math.Max(best, float64(n)*items[at].value+bruteKnapsack(items, room.Sub(taken), at+1))
	}
	return best
}

// randomItems draws n knapsack items (indexes from first on, at most most
// of each) of 250m–2,000m and 256 MiB–4 GiB.
func randomItems(rng *rand.Rand, n, first, most int) []knapsackItem {
	var items []knapsackItem
	for i := range n {
		items = append(items, knapsackItem{index: first + i, value: 0.1 + rng.Float64(), most: 1 + rng.IntN(most),
			size: api.Resources{MilliCPU: 250 * int64(1+rng.IntN(8)), MemoryBytes: int64(1+rng.IntN(16)) << 28}})
	}
	return items
}

// The branch and bound finds the best choice when it may search to the
// end, and when cut short its ceiling is never below the best choice (the
// configuration bound's validity rests on it).
func TestKnapsackIsExactAndItsCeilingHolds(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	room := api.Resources{MilliCPU: 4000, MemoryBytes: 8 << 30}
	for trial := range 200 {
		items := randomItems(rng, 2+rng.IntN(5), 0, 4)
		want := bruteKnapsack(items, room, 0)
		for _, byDensity := range []bool{false, true} {
			full := solveKnapsack(items, room, 1_000_000, byDensity)
			if math.Abs(full.value-want) > 1e-9 || math.Abs(full.ceiling-want) > 1e-9 {
				t.Fatalf("trial %d: found %.4f (ceiling %.4f), best is %.4f", trial, full.value, full.ceiling, want)
			}
			var used api.Resources
			for _, p := range full.picks {
				used = used.Add(times(items[slicesIndex(items, p.index)].size, p.count))
			}
			if !room.Fits(used) {
				t.Fatalf("trial %d: the choice %+v does not fit", trial, full.picks)
			}
			cut := solveKnapsack(items, room, 2, byDensity)
			if cut.ceiling < want-1e-9 || cut.value > want+1e-9 {
				t.Fatalf("trial %d: cut search found %.4f with ceiling %.4f, best is %.4f", trial, cut.value, cut.ceiling, want)
			}
		}
	}
}

// The grid's dynamic program finds the best choice, and its picks fit
// and are worth what it says.
func TestGridKnapsackIsExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	room := api.Resources{MilliCPU: 4000, MemoryBytes: 8 << 30}
	for trial := range 300 {
		items := randomItems(rng, 1+rng.IntN(6), 10, 5)
		want := bruteKnapsack(items, room, 0)
		got, _, ok := solveGridKnapsack(items, room)
		if !ok {
			t.Fatalf("trial %d: the grid does not apply to %d items", trial, len(items))
		}
		var used api.Resources
		worth := 0.0
		for _, p := range got.picks {
			it := items[slicesIndex(items, p.index)]
			if p.count > it.most {
				t.Fatalf("trial %d: %d of item %d, at most %d", trial, p.count, p.index, it.most)
			}
			used, worth = used.Add(times(it.size, p.count)), worth+float64(p.count)*it.value
		}
		if math.Abs(got.value-want) > 1e-9 || math.Abs(worth-want) > 1e-9 || got.ceiling != got.value || !room.Fits(used) {
			t.Fatalf("trial %d: found %.4f (picks worth %.4f, using %+v), best is %.4f", trial, got.value, worth, used, want)
		}
	}
}

func slicesIndex(items []knapsackItem, index int) int {
	for i, it := range items {
		if it.index == index {
			return i
		}
	}
	return -1
}

// Replicas of 600m, 600m and 700m on a 1,000m type: no machine holds two,
// so any plan buys three; the plain LP says 1.9 machines, the
// configuration bound three.
func TestConfigurationBoundCountsWhatFitsTogether(t *testing.T) {
	g := group("g", 0, 0, 100, pricedType("one", 1000, 4, 1))
	pending := append(replicas("s", 2, 600), replicas("t", 1, 700)...)
	p := Compute(DefaultConfig(), Input{Groups: []*Group{g}, Pending: pending, Now: now})
	if len(p.Add) != 3 || math.Abs(p.LowerBound-3) > 1e-6 || p.Gap > 1e-6 {
		t.Fatalf("want 3 machines at a bound of $3/h, got %d machines, bound $%.3f/h, gap %.2f%%", len(p.Add), p.LowerBound, 100*p.Gap)
	}
}

// What a machine holds of replicas that all ask multiples of 250m is a
// multiple of 250m: 7,900m of allocatable is worth 7,750m to the bound.
func TestRequestGrainFloorsTheAllocatable(t *testing.T) {
	rs := replicas("a", 2, 500)
	rs = append(rs, replicas("b", 2, 750)...)
	for i := range rs {
		rs[i].Requests.MemoryBytes = 384 << 20
	}
	rs[0].Requests.MemoryBytes = 128 << 20
	got := requestGrain(rs).floor(api.Resources{MilliCPU: 7900, MemoryBytes: 1000 << 20, GPUs: 1})
	want := api.Resources{MilliCPU: 7750, MemoryBytes: 896 << 20, GPUs: 1}
	if got != want {
		t.Fatalf("floored to %+v, want %+v", got, want)
	}
}
