package scheduler

import (
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/api"
)

func labelled(r Replica, labels map[string]string) Replica {
	r.Labels = labels
	return r
}

func required(topology string, sel map[string]string) []api.AffinityTerm {
	return []api.AffinityTerm{{Selector: sel, Topology: topology, Mode: api.AffinityRequired}}
}

var db = map[string]string{"app": "db"}

// Required anti-affinity on machine among replicas that all carry the
// label: at most one per machine, whatever service they belong to.
func TestRequiredAntiAffinityAcrossServices(t *testing.T) {
	ms := []*Machine{machine("a", "g", 8000, 16), machine("b", "g", 8000, 16), machine("c", "g", 8000, 16)}
	var pending []Replica
	for i := range 2 {
		r := labelled(replica("pg", i, 500, 256), db)
		r.Terms = &Terms{AntiAffinity: required(api.SpreadMachine, db)}
		pending = append(pending, r)
		r = labelled(replica("mysql", i, 500, 256), db)
		r.Terms = &Terms{AntiAffinity: required(api.SpreadMachine, db)}
		pending = append(pending, r)
	}
	res := Schedule(ms, pending)
	perMachine := map[string]int{}
	for _, p := range res.Placements {
		perMachine[p.MachineID]++
	}
	if len(res.Placements) != 3 || len(res.Unplaced) != 1 {
		t.Fatalf("want 3 placed (one per machine), 1 unplaced: %+v", res)
	}
	for m, n := range perMachine {
		if n != 1 {
			t.Fatalf("machine %s holds %d db replicas", m, n)
		}
	}
	for _, why := range res.Unplaced {
		if !strings.Contains(why, "anti-affinity: a replica matching app=db on the same machine") {
			t.Fatalf("reason %q", why)
		}
	}
}

// "Never on the same machine as any replica labelled app=db": a service
// that is not itself a db keeps off the db's machines, even when they are
// the fullest.
func TestAntiAffinityKeepsOffLabelledMachines(t *testing.T) {
	a, b := machine("a", "g", 8000, 16), machine("b", "g", 8000, 16)
	Schedule([]*Machine{a}, []Replica{labelled(replica("pg", 0, 4000, 256), db)})
	web := replica("web", 0, 500, 256)
	web.Terms = &Terms{AntiAffinity: required(api.SpreadMachine, db)}
	res := Schedule([]*Machine{a, b}, []Replica{web, labelled(replica("pg", 9, 100, 64), db)})
	if got := placedOn(res, "web-0"); got != "b" {
		t.Fatalf("web placed on %q, want b (a runs the db)", got)
	}
}

// Required affinity on zone: the first replica of the group goes where it
// fits, the others follow it into its zone; a service that follows the
// cache goes to the cache's zone.
func TestRequiredZoneAffinityFollowsTheFirst(t *testing.T) {
	var ms []*Machine
	for _, z := range []string{"z1", "z2", "z3"} {
		for _, n := range []string{"1", "2"} {
			m := machine(z+"-"+n, "g", 3000, 4)
			m.Zone = z
			ms = append(ms, m)
		}
	}
	cache := map[string]string{"app": "cache"}
	var pending []Replica
	for i := range 4 {
		r := labelled(replica("cache", i, 1000, 256), cache)
		r.Terms = &Terms{Affinity: required(api.SpreadZone, cache)}
		pending = append(pending, r)
	}
	follower := replica("api", 0, 1000, 256)
	follower.Terms = &Terms{Affinity: required(api.SpreadZone, cache)}
	res := Schedule(ms, append(pending, follower))
	zones := map[string]bool{}
	byID := map[string]*Machine{}
	for _, m := range ms {
		byID[m.ID] = m
	}
	for _, p := range res.Placements {
		zones[byID[p.MachineID].Zone] = true
	}
	if len(res.Unplaced) != 0 || len(zones) != 1 {
		t.Fatalf("want all 5 in one zone: placements %+v unplaced %v", res.Placements, res.Unplaced)
	}
	// Without any cache, the follower cannot be placed (it does not match
	// its own selector, so it cannot be the first).
	alone := replica("api", 1, 1000, 256)
	alone.Terms = &Terms{Affinity: required(api.SpreadZone, map[string]string{"app": "nothing"})}
	if res := Schedule(ms, []Replica{alone}); !strings.Contains(res.Unplaced["api-1"], "affinity: no replica matching app=nothing") {
		t.Fatalf("want unplaced for want of a match: %+v", res)
	}
}

// A preferred affinity chooses a machine that runs the selected replicas
// while one has room, and any machine otherwise.
func TestPreferredAffinityIsAPreference(t *testing.T) {
	a, b := machine("a", "g", 2000, 16), machine("b", "g", 4000, 16)
	b.Allocated = api.Resources{MilliCPU: 1000, MemoryBytes: 1 << 30} // b is fuller: binpack would choose it
	Schedule([]*Machine{a}, []Replica{labelled(replica("cache", 0, 1000, 256), map[string]string{"app": "cache"})})
	near := func(i int) Replica {
		r := replica("api", i, 1000, 256)
		r.Terms = &Terms{Affinity: []api.AffinityTerm{{Selector: map[string]string{"app": "cache"}, Topology: api.SpreadMachine, Mode: api.AffinityPreferred, Weight: 50}}}
		return r
	}
	res := Schedule([]*Machine{a, b}, []Replica{near(0), near(1), labelled(replica("cache", 9, 0, 0), map[string]string{"app": "cache"})})
	if placedOn(res, "api-0") != "a" || placedOn(res, "api-1") != "b" {
		t.Fatalf("want api-0 next to the cache, api-1 wherever there is room: %+v", res.Placements)
	}
}

// Anti-affinity holds both ways, as in Kubernetes: a replica selected by
// another service's required anti-affinity keeps off that service's
// machines, even when it has no rule of its own and comes second.
func TestAntiAffinityIsSymmetric(t *testing.T) {
	a, b := machine("a", "g", 8000, 16), machine("b", "g", 8000, 16)
	cache := labelled(replica("cache", 0, 4000, 256), map[string]string{"app": "cache"})
	cache.Terms = &Terms{AntiAffinity: required(api.SpreadMachine, db)}
	res := Schedule([]*Machine{a, b}, []Replica{cache, labelled(replica("pg", 0, 500, 256), db)})
	if placedOn(res, "cache-0") == placedOn(res, "pg-0") {
		t.Fatalf("the db joined the cache that keeps dbs away: %+v", res.Placements)
	}
}

// A machine opened for a replica with a required zone term is asked for a
// zone that keeps the term; one without zone terms is asked for none.
func TestOpenerIsToldTheZoneTheTermsAllow(t *testing.T) {
	full := machine("a", "g", 100, 16)
	full.Zone = "z1"
	Schedule([]*Machine{full}, []Replica{labelled(replica("pg", 0, 0, 0), db)})
	hints := map[string]string{}
	open := func(r *Replica, zone string) (*Machine, string) {
		hints[r.ID] = zone
		m := machine("new-"+r.ID, "g", 8000, 16)
		m.Zone = zone
		return m, ""
	}
	away := replica("web", 0, 1000, 256)
	away.ZoneDomains = []string{"z1", "z2", "z3"}
	away.Terms = &Terms{AntiAffinity: required(api.SpreadZone, db)}
	anywhere := replica("api", 0, 1000, 256)
	anywhere.ZoneDomains = []string{"z1", "z2"}
	anywhere.Terms = &Terms{AntiAffinity: required(api.SpreadMachine, db)}
	for _, r := range []Replica{away, anywhere} { // one session each: neither may land on the other's new machine
		NewSession([]*Machine{full.Clone()}).Place([]Replica{r, labelled(replica("pg", 9, 0, 0), db)}, open)
	}
	if hints["web-0"] != "z2" || hints["api-0"] != "" {
		t.Fatalf("hints %v: want web kept out of z1 (first allowed: z2), api free", hints)
	}
}

// A session does not look at a machine's first PlainResidents residents
// and learns from those after them: a db after a plain resident keeps
// web off its machine; counted among the plain ones (wrongly, to show the
// count is read), it does not.
func TestSessionLearnsTheResidentsAfterThePlainOnes(t *testing.T) {
	a := machine("a", "g", 8000, 16)
	plain, pg := replica("api", 0, 100, 64), labelled(replica("pg", 0, 100, 64), db)
	for _, r := range []*Replica{&plain, &pg} {
		Assign(a, *r, nil)
		a.Residents = append(a.Residents, Resident{Replica: r})
	}
	web := replica("web", 0, 500, 256)
	web.Terms = &Terms{AntiAffinity: required(api.SpreadMachine, db)}
	for _, tc := range []struct {
		plain int
		want  string
	}{{0, ""}, {1, ""}, {2, "a"}} {
		a.PlainResidents = tc.plain
		if got := placedOn(Schedule([]*Machine{a.Clone()}, []Replica{web}), "web-0"); got != tc.want {
			t.Errorf("with %d plain residents web went on %q, want %q", tc.plain, got, tc.want)
		}
	}
}
