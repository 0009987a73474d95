package decide

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/provider/registry"
)

// Once a pass changed or launched machines, the steps that count them
// (a group's rollout tally, the provider keys to list) take the census
// with those machines counted again, not a walk of every machine, and
// find what the walk finds.
func TestAPassThatChangedMachinesCountsThemFromTheCensus(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	cl := testCluster("c", "fake", "g", "h")
	machine := func(id, group, template string) *api.Machine {
		return &api.Machine{ID: id, Cluster: "c", Group: group, Provider: "fake", FleetState: api.FleetActive, JoinState: api.JoinJoined,
			ProviderID: "i-" + id, TemplateHash: template}
	}
	fleet := []*api.Machine{machine("c-g-1", "g", "t1"), machine("c-g-2", "g", "t1"), machine("c-g-3", "g", "t1"), machine("c-h-1", "h", "t1")}
	snap := &Snapshot{Machines: fleet, MachinesByID: true, InStoreOrder: true, Clusters: map[string]*api.Cluster{"c": cl},
		Providers: map[string]ProviderInfo{"fake": {Provisions: true}}}
	p := newPass(DefaultConfig(), snap, Memory{}, now)
	p.drain(p.machines[1], "a test")
	p.launch(Launch{Key: "l", Cluster: "c", Group: "g", InstanceType: "small", Zone: "a"}, "t1")
	p.ownMachine(p.machines[3]).TemplateHash = "t2"
	if len(p.mineMachines) == 0 || p.fleet() != nil {
		t.Fatal("the pass changed no machine: nothing tested")
	}
	c := p.counts()
	if c == nil {
		t.Fatal("the pass's counts were not taken from the census")
	}
	tallied := 0
	for _, g := range []struct{ group, current string }{{"g", "t1"}, {"h", "t1"}, {"h", "t2"}} {
		provisions := func(provider string) bool { return p.snap.Providers[provider].Provisions }
		busy := func() map[string]bool { return nil }
		walked := p.tallyByWalk("c", g.group, g.current, busy, provisions)
		counted, ok := c.rollout("c", g.group, g.current, provisions)
		if ok && (counted.live != walked.live || len(walked.outdated) > 0 || len(walked.stoppedOutdated) > 0) {
			t.Errorf("group %s at %s: counted %+v, walked %+v", g.group, g.current, counted, walked)
		}
		if ok {
			tallied++
		}
		if !ok && len(walked.outdated) == 0 {
			t.Errorf("group %s at %s: the census saw outdated machines, the walk none", g.group, g.current)
		}
	}
	if tallied != 2 {
		t.Errorf("%d groups tallied from the census, want 2 (g at t1, h at t2)", tallied)
	}
	var keys []string
	for _, m := range p.machines {
		if key := registry.KeyOf(m); !slices.Contains(keys, key) {
			keys = append(keys, key)
		}
	}
	if got := slices.Sorted(slices.Values(c.keys)); !slices.Equal(got, slices.Sorted(slices.Values(keys))) {
		t.Errorf("provider keys counted %v, walked %v", got, keys)
	}
}

// Once a pass changed machines, the steps that look at machines in a
// passing state (terminating, draining, launching) are handed those the
// census with the changed ones counted again lists, in the pass's order,
// not every machine: the same machines in that state a walk finds.
func TestAPassThatChangedMachinesLooksAtThoseInAStateFromTheCensus(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	cl := testCluster("c", "fake", "g")
	var fleet []*api.Machine
	for i := range 12 {
		m := &api.Machine{ID: fmt.Sprintf("c-g-%02d", i), Cluster: "c", Group: "g", Provider: "fake", FleetState: api.FleetActive,
			JoinState: api.JoinJoined, ProviderID: fmt.Sprintf("i-%d", i)}
		if i%4 == 1 {
			m.FleetState = api.FleetTerminating
		}
		fleet = append(fleet, m)
	}
	snap := &Snapshot{Machines: fleet, MachinesByID: true, InStoreOrder: true, Clusters: map[string]*api.Cluster{"c": cl},
		Providers: map[string]ProviderInfo{"fake": {Provisions: true}}}
	p := newPass(DefaultConfig(), snap, Memory{}, now)
	p.terminate(p.machines[6], CauseRemoved, "a test", false)
	p.drain(p.machines[8], "a test")
	p.launch(Launch{Key: "l", Cluster: "c", Group: "g", InstanceType: "small", Zone: "a"}, "")
	if p.fleet() != nil {
		t.Fatal("the pass changed no machine: nothing tested")
	}
	for _, state := range []struct {
		name string
		of   func(*fleetCensus) []int
		is   func(*api.Machine) bool
	}{
		{"terminating", func(c *fleetCensus) []int { return c.terminating }, func(m *api.Machine) bool { return m.FleetState == api.FleetTerminating }},
		{"draining", func(c *fleetCensus) []int { return c.draining }, func(m *api.Machine) bool { return m.FleetState == api.FleetDraining }},
		{"launching", func(c *fleetCensus) []int { return c.launching }, func(m *api.Machine) bool { return m.Launching() }},
	} {
		handed := p.machinesIn(state.of)
		if len(handed) == len(p.machines) {
			t.Errorf("%s: handed every machine", state.name)
		}
		var walked, found []string
		for _, m := range p.machines {
			if state.is(m) {
				walked = append(walked, m.ID)
			}
		}
		for _, m := range handed {
			if state.is(m) {
				found = append(found, m.ID)
			}
		}
		if len(walked) == 0 || !slices.Equal(found, walked) {
			t.Errorf("%s: handed %v, a walk finds %v", state.name, found, walked)
		}
	}
}
