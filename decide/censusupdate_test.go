package decide

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
)

// randomMachine is a machine of one of a few groups and providers, in a
// random state.
func randomMachine(rng *rand.Rand, id string) *api.Machine {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m := &api.Machine{ID: id, Cluster: "c", Group: fmt.Sprintf("g%d", rng.IntN(3)), Provider: "fake", ProviderKey: "fake",
		TemplateHash: fmt.Sprintf("t%d", rng.IntN(2)), CreatedAt: now}
	randomState(rng, m)
	return m
}

func randomState(rng *rand.Rand, m *api.Machine) {
	m.JoinState = []api.JoinState{api.JoinProvisioning, api.JoinBooting, api.JoinJoined}[rng.IntN(3)]
	m.FleetState = []api.FleetState{api.FleetReady, api.FleetActive, api.FleetDraining, api.FleetTerminating, api.FleetStopped, api.FleetTerminated}[rng.IntN(6)]
	m.Subnet, m.UnreachableSince, m.Runtimes = "", nil, nil
	if rng.IntN(2) == 0 {
		m.Subnet = "10.244.1.0/24"
	}
	if rng.IntN(5) == 0 {
		at := m.CreatedAt
		m.UnreachableSince = &at
	}
	if rng.IntN(4) == 0 {
		m.Runtimes = []string{"process", "kata-cc"}
	}
	m.TemplateHash = fmt.Sprintf("t%d", rng.IntN(2))
}

// The census updated for machines changed in place (updatedCensus), and
// the pass's census once it changed and launched machines
// (withMachines), are the counts a count afresh makes.
func TestACensusCountedAgainForChangedMachinesIsACountAfresh(t *testing.T) {
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 5))
		machines := make([]*api.Machine, 1+rng.IntN(30))
		for i := range machines {
			machines[i] = randomMachine(rng, fmt.Sprintf("m%03d", i))
		}
		before := countFleet(machines)
		// Some change in place, as the store's writes do.
		next := slices.Clone(machines)
		changed := map[string]bool{}
		for range rng.IntN(5) {
			i := rng.IntN(len(next))
			c := *next[i]
			randomState(rng, &c)
			next[i], changed[c.ID] = &c, true
		}
		snap := &Snapshot{Machines: next, Booked: &Booking{census: before}, Changed: &Changes{Machines: changed}}
		got, want := updatedCensus(snap, next, len(next)), countFleet(next)
		if got == nil || !reflect.DeepEqual(got.read(), want.read()) {
			t.Fatalf("seed %d: updated %+v, afresh %+v", seed, got.read(), want.read())
		}
		// The pass changes some more and launches some.
		mine := map[*api.Machine]bool{}
		pass := slices.Clone(next)
		for range rng.IntN(4) {
			i := rng.IntN(len(pass))
			if mine[pass[i]] { // the pass's own copy, changed again (ownMachine)
				randomState(rng, pass[i])
				continue
			}
			c := *pass[i]
			randomState(rng, &c)
			pass[i], mine[&c] = &c, true
		}
		for k := range rng.IntN(3) {
			m := randomMachine(rng, fmt.Sprintf("%sk%d", placeholderPrefix, k))
			m.JoinState, m.FleetState = api.JoinProvisioning, api.FleetReady
			if k == 1 {
				m.ProviderKey = "fake:other"
			}
			pass, mine[m] = append(pass, m), true
		}
		now, afresh := want.withMachines(pass, len(next), mine), countFleet(pass)
		afresh.ids, afresh.marks = nil, nil
		if now == nil || !reflect.DeepEqual(now.read(), afresh.read()) {
			t.Fatalf("seed %d: with the pass's machines %+v, afresh %+v", seed, now.read(), afresh.read())
		}
		if strings.Contains(fmt.Sprint(now.keys), "other") != slices.ContainsFunc(pass, func(m *api.Machine) bool { return m.ProviderKey == "fake:other" }) {
			t.Fatalf("seed %d: keys %v", seed, now.keys)
		}
	}
}

// The census with the machines made and deleted since spliced in and
// out, and those changed counted again (splicedCensus), is the count a
// count afresh makes; whole groups come and go. A feed that misses a
// machine made gets a count afresh.
func TestACensusSplicedForMachinesMadeAndDeletedIsACountAfresh(t *testing.T) {
	spliced := 0
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 9))
		machines := randomFleet(rng)
		before := countFleet(machines)
		next, changed := remade(rng, machines)
		snap := &Snapshot{Machines: next, Booked: &Booking{census: before}, Changed: &Changes{Machines: changed}}
		got, want := splicedFrom(snap, next), countFleet(next)
		if got == nil || !reflect.DeepEqual(got.read(), want.read()) {
			t.Fatalf("seed %d: spliced %+v, afresh %+v", seed, got.read(), want.read())
		}
		if len(next) != len(machines) {
			spliced++
		}
		for _, m := range next {
			if _, existed := slices.BinarySearchFunc(machines, m.ID, func(x *api.Machine, id string) int { return strings.Compare(x.ID, id) }); !existed {
				delete(changed, m.ID) // a machine made that the feed misses
				if got := splicedFrom(snap, next); got != nil {
					t.Fatalf("seed %d: a feed without %s, made, spliced a census", seed, m.ID)
				}
				break
			}
		}
	}
	if spliced == 0 {
		t.Fatal("no fleet drawn made or deleted a machine")
	}
}

// The view's skeleton with the machines made and deleted since spliced
// in and out, and those changed read again (splicedSkeleton), is what a
// view reading every machine takes (takeSkeleton), over 300 seeded
// fleets.
func TestASkeletonSplicedForMachinesMadeAndDeletedIsAReadAfresh(t *testing.T) {
	clusters := map[string]*api.Cluster{"c": {Metadata: api.ObjectMeta{Name: "c"}}}
	passOver := func(snap *Snapshot, machines []*api.Machine) *Pass {
		snap.Clusters = clusters
		return &Pass{snap: snap, machines: machines, sortedMachines: len(machines), census: countFleet(machines)}
	}
	spliced := 0
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 11))
		machines := randomFleet(rng)
		last := passOver(&Snapshot{Machines: machines}, machines)
		booked := &Booking{census: last.census, skeleton: last.takeSkeleton([]string{"c"})}
		next, changed := remade(rng, machines)
		p := passOver(&Snapshot{Machines: next, Booked: booked, Changed: &Changes{Machines: changed}}, next)
		got := p.splicedSkeleton([]string{"c"})
		from := p.splicedFrom
		if want := p.takeSkeleton([]string{"c"}); got == nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("seed %d: spliced %+v, read afresh %+v", seed, got, want)
		}
		// Each entry's place in the last skeleton (the booking's merge
		// takes it instead of finding the machine by its id).
		for i, k := range from {
			if k >= 0 && booked.skeleton.ids[k] != got.ids[i] || k < 0 && slices.Contains(booked.skeleton.ids, got.ids[i]) {
				t.Fatalf("seed %d: machine %s is said to have been at %d of the last skeleton, whose ids are %v", seed, got.ids[i], k, booked.skeleton.ids)
			}
		}
		if len(next) != len(machines) {
			spliced++
		}
	}
	if spliced == 0 {
		t.Fatal("no fleet drawn made or deleted a machine")
	}
}

// randomFleet is up to 30 random machines, by id, with room for machines
// made between them (remade).
func randomFleet(rng *rand.Rand) []*api.Machine {
	var machines []*api.Machine
	for i := range 1 + rng.IntN(30) {
		machines = append(machines, randomMachine(rng, fmt.Sprintf("m%03d", 2*i)))
	}
	return machines
}

// remade is machines with some deleted, some changed in place and some
// made between them (of a group none had, at times), by id, and the ids
// of those, as the change feed names them.
func remade(rng *rand.Rand, machines []*api.Machine) ([]*api.Machine, map[string]bool) {
	changed := map[string]bool{}
	var next []*api.Machine
	for i, m := range machines {
		switch rng.IntN(8) {
		case 0: // deleted
			changed[m.ID] = true
			continue
		case 1: // changed in place
			c := *m
			randomState(rng, &c)
			m, changed[m.ID] = &c, true
		}
		next = append(next, m)
		if rng.IntN(6) == 0 { // made, between this and the next
			made := randomMachine(rng, fmt.Sprintf("m%03d", 2*i+1))
			made.Group = fmt.Sprintf("g%d", rng.IntN(4))
			next, changed[made.ID] = append(next, made), true
		}
	}
	return next, changed
}

// splicedFrom is the census of next spliced from the snapshot's booked one
// (nil: the feed does not tell how).
func splicedFrom(snap *Snapshot, next []*api.Machine) *fleetCensus {
	sp, ok := spliceOf(snap, next, len(next))
	if !ok {
		return nil
	}
	return splicedCensus(snap.Booked.census, next, sp, &spares{})
}
