package scheduler

import (
	"testing"

	"github.com/gantry-dev/gantry/api"
)

// A placement between two classes of one shape changes what the second is
// told: the explanation of the first is not taken for it. The classes go
// by priority: a large one (it does not fit: too little memory left), a
// small one (it fits, and takes the CPU the large one's memory shortfall
// hid), then a large one again (now short of CPU first).
func TestAPlacementBetweenClassesOfOneShapeIsExplainedAgain(t *testing.T) {
	m := machine("m", "g", 1000, 1)
	large := func(svc string, priority int) Replica {
		r := replica(svc, 0, 600, 2048)
		r.Priority = priority
		return r
	}
	small := replica("small", 0, 500, 256)
	small.Priority = 5
	res := Schedule([]*Machine{m}, []Replica{large("first", 10), small, large("last", 1)})
	if placedOn(res, "small-0") != "m" {
		t.Fatalf("the small replica was not placed: %+v", res)
	}
	for id, want := range map[string]string{
		"first-0": "0/1 machines fit: 1 insufficient memory",
		"last-0":  "0/1 machines fit: 1 insufficient cpu",
	} {
		if got := res.Unplaced[id]; got != want {
			t.Errorf("%s: %q, want %q", id, got, want)
		}
	}
}

// Services of one shape waiting together are each told why, alike.
func TestServicesOfOneShapeAreToldAlike(t *testing.T) {
	full := machine("full", "g", 1000, 1)
	full.Allocated = api.Resources{MilliCPU: 800, MemoryBytes: 512 << 20}
	res := Schedule([]*Machine{full}, []Replica{replica("a", 0, 500, 256), replica("b", 0, 500, 256), replica("c", 0, 500, 256)})
	for _, id := range []string{"a-0", "b-0", "c-0"} {
		if got, want := res.Unplaced[id], "0/1 machines fit: 1 insufficient cpu"; got != want {
			t.Errorf("%s: %q, want %q", id, got, want)
		}
	}
}
