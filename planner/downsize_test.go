package planner

import (
	"slices"
	"testing"

	"github.com/gantry-dev/gantry/scheduler"
)

// Downsizing's session is the live machines and the new ones the plan
// still keeps: a new machine compaction dropped is left out, even when a
// live machine has its id (new machines are named by their count, and
// a machine's id is whatever its provider gave it).
func TestDownsizingLeavesOutTheNewMachinesCompactionDropped(t *testing.T) {
	g := group("g", 2, 0, 10, itype(2))
	live := joined("new-2", "g", itype(2), 0)
	other := joined("m-1", "g", itype(2), 0)
	p := &planning{in: Input{Groups: []*Group{g}, Machines: []*Machine{live, other}, Now: now}, added: map[string]int{}}
	cand := &candidate{group: g, itype: g.Types[0], offering: g.Types[0].Offerings[0]}
	r := scheduler.Replica{ID: "r"}
	kept, dropped := p.openCandidate(cand, &r), p.openCandidate(cand, &r)
	if dropped.ID != live.ID {
		t.Fatalf("the second new machine is %q: the test wants it named as the live %q", dropped.ID, live.ID)
	}
	p.bins = p.bins[:1] // compaction moved the second's replicas onto the first
	shared := []*scheduler.Machine{live.Machine.Clone(), other.Machine.Clone()}
	got := p.sessionMachines(append(slices.Clone(shared), kept, dropped))
	if want := append(shared, kept); !slices.Equal(got, want) {
		t.Fatalf("downsizing's machines are %v, want %v", ids(got), ids(want))
	}
}

func ids(ms []*scheduler.Machine) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}
