package scheduler

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gantry-dev/gantry/api"
)

// The fit index finds exactly what a walk from the position would, as
// machines fill, empty and are added.
func TestFitIndexFindsWhatAWalkFinds(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	var ms []*Machine
	for i := 0; i < 37; i++ {
		ms = append(ms, &Machine{ID: fmt.Sprintf("m%d", i), Allocatable: api.Resources{MilliCPU: 4000, MemoryBytes: 8 << 30}})
	}
	x := newFitIndex(ms)
	walk := func(from int, req api.Resources) int {
		for i := from; i < len(x.machines); i++ {
			if !x.machines[i].excluded && x.machines[i].Free().Fits(req) {
				return i
			}
		}
		return -1
	}
	for step := 0; step < 3000; step++ {
		req := api.Resources{MilliCPU: rng.Int64N(3000), MemoryBytes: rng.Int64N(6 << 30)}
		from := rng.IntN(len(x.machines) + 1)
		got, want := x.first(from, req), walk(from, req)
		if got != want {
			t.Fatalf("step %d: first(%d, %+v) = %d, a walk finds %d", step, from, req, got, want)
		}
		switch m := x.machines[rng.IntN(len(x.machines))]; rng.IntN(4) {
		case 0:
			if m.Free().Fits(req) {
				Assign(m, Replica{Requests: req, Rules: &Rules{Service: "s"}}, nil)
			}
		case 1:
			if m.Allocated.Fits(req) {
				Unassign(m, Replica{Requests: req, Rules: &Rules{Service: "s"}}, nil)
			}
		case 2:
			(&Session{}).Exclude(m, !m.excluded)
		case 3:
			x.add(&Machine{ID: fmt.Sprintf("new%d", step), Allocatable: api.Resources{MilliCPU: 2000, MemoryBytes: 4 << 30}})
		}
	}
}

// An excluded machine takes nothing until it is let back in.
func TestExcludedMachineTakesNothing(t *testing.T) {
	a := &Machine{ID: "a", Cluster: "c", Runtimes: []string{RuntimeDocker}, Allocatable: api.Resources{MilliCPU: 4000, MemoryBytes: 8 << 30}}
	s := NewSession([]*Machine{a})
	s.Exclude(a, true)
	r := Replica{ID: "r", Requests: api.Resources{MilliCPU: 100}, Rules: &Rules{Service: "s", Cluster: "c", Runtime: RuntimeDocker}}
	if res, ok := s.PlaceAll([]Replica{r}); ok || len(res.Placements) != 0 {
		t.Fatalf("placed on an excluded machine: %+v", res)
	}
	s.Exclude(a, false)
	if res, ok := s.PlaceAll([]Replica{r}); !ok || res.Placements[0].MachineID != "a" {
		t.Fatalf("not placed once let back in: %+v", res)
	}
}
