// Package decide is one pass of the control loop, as a pure function:
// Decide(config, snapshot, memory, now) returns a Plan and does nothing
// else — no I/O, no clock, no goroutines. The act step (package
// controller) carries the plan out; `gantry plan` shows it. Tests build a
// snapshot, decide, and assert on the plan.
//
// A pass keeps every service's replicas in line with its spec, folds in
// the outcomes of provider calls, then hands each cluster to its target.
// Machines are the first target: it recovers instances, notices lost
// machines, finishes drains, rolls out templates, follows launches and
// terminations, schedules replicas, repairs spread, and sizes capacity
// groups through the planner.
package decide

import (
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/fleet"
	"github.com/gantry-dev/gantry/planner"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/replica"
)

// Target is where a cluster's replicas run. Decide hands each target the
// clusters that use it, after the steps every cluster shares.
type Target interface {
	Decide(p *Pass, clusters []string)
}

// targetOf is the target of a cluster: Pods in an existing Kubernetes
// cluster, or machines Gantry provisions.
func targetOf(c *api.Cluster) Target {
	if c.Kubernetes() {
		return podsTarget{}
	}
	return machines{}
}

// Pass is one pass's working state: copies of the snapshot's machines
// and replicas that the steps change as they decide, so that each step
// sees what the earlier ones decided, and the plan being written.
type Pass struct {
	cfg  Config
	snap *Snapshot
	now  time.Time
	plan Plan
	mem  *Memory

	// machines are by id, then those the pass launched (from
	// sortedMachines on): the snapshot's, shared and never changed, until
	// the pass changes one (ownMachine), as replicas are.
	machines       []*api.Machine
	sortedMachines int
	// mineMachines are the machines the pass copied or launched.
	mineMachines map[*api.Machine]bool
	// replicas are the snapshot's, shared and never changed, until the
	// pass changes one: own swaps in a copy first. Copying all of them
	// took a quarter of a pass at 500,000 replicas, to change a few.
	replicas []*api.Replica
	// index finds a replica's position in replicas.
	index    replicaIndex
	services map[string]*api.Service
	// deleting are the replicas this pass deletes (or retires).
	deleting map[string]bool
	// retiring are replicas out of their names, running until drained:
	// gone for every decision but the machines' usage.
	retiring []*api.Replica
	// mine are the replicas the pass copied (own) or made.
	mine map[*api.Replica]bool
	// in is the memory the pass began with, never changed.
	in Memory
	// owns: which of mem's copy-on-write sections are the pass's own.
	owns ownedSections
	// endedMoves are the snapshot's replicas whose moves the pass ended
	// (finishHandovers), as they were.
	endedMoves []*api.Replica
	// tallies are the complete deployments' tallies for the next pass
	// (deploytally.go).
	tallies map[string]*deployTally
	// quiet are the services whose steps decided nothing (quiet.go).
	quiet map[string]quietService
	// hashes are the services' revision hashes (revisionhash.go).
	hashes map[string]string
	// snapInOrder: the snapshot's replicas are by service and id, as the
	// store lists them, and every id begins with its service's name.
	snapInOrder bool
	live        int
	// census counts the snapshot's machines (census.go).
	census *fleetCensus
	// skeleton is what the view read of each of its machines
	// (skeleton.go); splicedFrom, when the pass spliced it from the last
	// pass's, is the place each entry had there (-1: a machine new to
	// it).
	skeleton    *viewSkeleton
	splicedFrom []int32
	// revisionIndex lists the memory's revision keys by service (nil
	// until revisionKeys builds it).
	revisionIndex map[string][]string
	// requests memoizes requestsOf.
	requests map[requestsKey]api.Resources
	// capacity is what scheduling and the planner found, for the next
	// pass if this one changes nothing (quietcapacity.go).
	capacity *quietCapacity
	// view is the pass's view of its machine target's machines, and
	// candidateAt when the next of them becomes a consolidation
	// candidate (walkView).
	view        *view
	candidateAt time.Time
	// splice is how its machines differ from the last census's, once
	// found (sinceLast).
	splice struct {
		of        splice
		found, ok bool
	}
	capacityReused bool
	// schedulingReused: the pass took the last pass's scheduling alone.
	schedulingReused bool
	// keptTallies counts the services whose step took the last pass's
	// tally (keptTally).
	keptTallies int
}

// Decide decides one pass.
func Decide(cfg Config, snap *Snapshot, mem Memory, now time.Time) Plan {
	p := newPass(cfg, snap, mem, now)
	p.finishRetiring()
	p.finishHandovers()
	p.syncReplicas()
	p.foldOutcomes()
	// The machine target always runs: machines of deleted clusters still
	// need care.
	byTarget := map[Target][]string{machines{}: nil}
	order := []Target{machines{}}
	for _, name := range p.clusterNames() {
		t := targetOf(snap.Clusters[name])
		if _, seen := byTarget[t]; !seen {
			order = append(order, t)
		}
		byTarget[t] = append(byTarget[t], name)
	}
	for _, t := range order {
		t.Decide(p, byTarget[t])
	}
	p.decideFailover()
	p.forget()
	slices.Sort(p.plan.PendingChanged)
	p.plan.PendingChanged = slices.Compact(p.plan.PendingChanged)
	p.plan.Memory = *p.mem
	if p.view != nil {
		p.noteMachinesChanged(p.view, &p.snap.Scratch.of().planner)
	}
	if p.plan.Booked != nil {
		if leavesCapacity(p.plan) {
			p.plan.Booked.capacity = p.capacity
		}
		p.plan.Booked.reused, p.plan.Booked.keptTallies = p.capacityReused, p.keptTallies
		p.plan.Booked.reusedScheduling = p.schedulingReused
		p.plan.Booked.census, p.plan.Booked.skeleton = p.census, p.skeleton
		if p.view != nil && p.view.booked && p.view.patchable() {
			p.plan.Booked.view = p.view
		}
		p.plan.Booked.patched = p.view != nil && p.view.patched
		p.plan.Booked.restored = p.view != nil && p.view.restored
		p.plan.Booked.spliced = p.view != nil && p.view.from != nil
		p.plan.Booked.partlyWalked = p.view != nil && p.view.walk != nil && p.view.walk.partly
		p.plan.Booked.ownMachines = make(map[string]bool, len(p.mineMachines))
		for m := range p.mineMachines {
			p.plan.Booked.ownMachines[m.ID] = true
		}
		if sc := snap.Scratch; sc != nil && snap.Booked != nil {
			sc.spare.retire(snap.Booked, p.plan.Booked)
		}
	}
	return p.plan
}

func newPass(cfg Config, snap *Snapshot, mem Memory, now time.Time) *Pass {
	next := passMemory(mem)
	p := &Pass{cfg: cfg, snap: snap, now: now.UTC(), mem: &next, in: mem, quiet: map[string]quietService{},
		services: make(map[string]*api.Service, len(snap.Services)), deleting: map[string]bool{}, mine: map[*api.Replica]bool{}, mineMachines: map[*api.Machine]bool{}}
	p.plan.Pending = map[string]string{}
	p.machines = append(room(&snap.Scratch.of().apiMachines, len(snap.Machines)), snap.Machines...)
	if !snap.MachinesByID {
		if snap.Heartbeats != nil {
			panic("decide: a snapshot's Heartbeats are aligned with its Machines by id; MachinesByID is unset")
		}
		slices.SortFunc(p.machines, func(a, b *api.Machine) int { return strings.Compare(a.ID, b.ID) })
	}
	p.sortedMachines = len(p.machines)
	if p.census = keptCensus(snap); p.census == nil {
		if p.census = updatedCensus(snap, p.machines, p.sortedMachines); p.census == nil {
			if sp, ok := p.sinceLast(); ok {
				p.census = splicedCensus(snap.Booked.census, p.machines, sp, p.spares())
			}
			if p.census == nil {
				p.census = countFleet(p.machines)
			}
		}
	}
	p.live = p.census.live
	// In the store's order, the lists of both kinds are too.
	p.snapInOrder = true
	check := !snap.InStoreOrder
	if !check && snap.Retiring != nil {
		p.replicas = snap.AllReplicas().AppendTo(room(&snap.Scratch.of().replicas, snap.ReplicaCount()))
		p.takeRetiring(snap.Retiring)
		p.index = indexOf(p.replicas, true)
		p.finishNew()
		return p
	}
	p.replicas = room(&snap.Scratch.of().replicas, snap.ReplicaCount())
	var before *api.Replica
	for r := range snap.AllReplicas().All {
		if check && p.snapInOrder && (idOutsideService(r) || before != nil && byServiceAndID(before, r) > 0) {
			p.snapInOrder = false
		}
		before = r
		if r.RetiringSince != nil {
			p.retiring = append(p.retiring, r) // read, never changed
			continue
		}
		p.replicas = append(p.replicas, r)
	}
	p.index = indexOf(p.replicas, p.snapInOrder)
	p.finishNew()
	return p
}

// takeRetiring moves the retiring replicas of those ids (the snapshot's
// word) from the pass's list, in the store's order, to p.retiring, each
// found by a search of the list by service and id.
func (p *Pass) takeRetiring(ids []string) {
	if len(ids) == 0 {
		return
	}
	x := indexOf(p.replicas, true)
	at := make([]int, 0, len(ids))
	for _, id := range ids {
		if i, ok := x.find(p.replicas, id); ok {
			at = append(at, i)
		}
	}
	slices.Sort(at)
	at = slices.Compact(at)
	kept := p.replicas[:0]
	from := 0
	for _, i := range at {
		p.retiring = append(p.retiring, p.replicas[i])
		kept = append(kept, p.replicas[from:i]...) // copies down: kept never passes from
		from = i + 1
	}
	p.replicas = append(kept, p.replicas[from:]...)
}

// finishNew indexes the services.
func (p *Pass) finishNew() {
	for _, s := range p.snap.Services {
		p.services[s.Metadata.Name] = s
	}
	p.plan.LiveMachines, p.plan.ConsolidatedAt = p.live, p.snap.ConsolidatedAt
	p.tallies = p.keepTallies()
	p.hashes = p.keepRevisionHashes()
}

func (p *Pass) addReplica(r *api.Replica) {
	c := *r
	p.index.add(c.ID, len(p.replicas))
	p.replicas = append(p.replicas, &c)
	p.mine[&c] = true
}

// replica is the pass's replica of that id (nil: none, or retiring).
func (p *Pass) replica(id string) *api.Replica {
	if i, ok := p.index.find(p.replicas, id); ok {
		return p.replicas[i]
	}
	return nil
}

// own returns the pass's own copy of r, to change: the first time, a
// copy that takes r's place in the pass. Callers change what it
// returns, never r.
func (p *Pass) own(r *api.Replica) *api.Replica {
	if p.mine[r] {
		return r
	}
	i, ok := p.index.findOf(p.replicas, r.Service, r.ID)
	if !ok || p.replicas[i] != r {
		panic("decide: own of a replica the pass does not hold: " + r.ID)
	}
	return takeCopy(p.replicas, i, p.mine)
}

// takeCopy puts a copy of list[i] in its place, notes it in mine, and
// returns it.
func takeCopy[T any](list []*T, i int, mine map[*T]bool) *T {
	c := *list[i]
	list[i] = &c
	mine[&c] = true
	return &c
}

func (p *Pass) clusterNames() []string {
	names := make([]string, 0, len(p.snap.Clusters))
	for n := range p.snap.Clusters {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (p *Pass) event(typ, reason, kind, name, msg string) {
	p.plan.Events = append(p.plan.Events, Event{Type: typ, Reason: reason, ObjectKind: kind, ObjectName: name, Message: msg})
}

func (p *Pass) inFlight(kind, subject string) bool { return p.snap.InFlight[CallKey(kind, subject)] }

// provisions reports whether a machine's provider launches machines (not
// one joined by hand).
func (p *Pass) provisions(m *api.Machine) bool { return p.snap.Providers[m.Provider].Provisions }

// ownMachine returns the pass's own copy of m, to change: the first
// time, a copy that takes m's place in the pass. Callers change what it
// returns, never m.
func (p *Pass) ownMachine(m *api.Machine) *api.Machine {
	if p.mineMachines[m] {
		return m
	}
	i, ok := findByID(p.machines, p.sortedMachines, m.ID, apiMachineID)
	if !ok || p.machines[i] != m {
		panic("decide: ownMachine of a machine the pass does not hold: " + m.ID)
	}
	return takeCopy(p.machines, i, p.mineMachines)
}

// terminate marks a machine terminating; its replicas go back to pending,
// and replicas moving off it keep their new machine.
func (p *Pass) terminate(m *api.Machine, cause, why string, diagnose bool) {
	m = p.ownMachine(m)
	changed, err := fleet.Terminating(m, why, p.now)
	if err != nil || !changed {
		return
	}
	p.plan.Terminates = append(p.plan.Terminates, Terminate{Machine: m.ID, Cause: cause, Reason: why, Diagnose: diagnose})
	unassigned := "machine " + m.ID + " is terminating: " + why
	for _, r := range p.mayHold(m.ID) {
		if r.PreviousMachine == m.ID {
			r = p.own(r)
			replica.EndMove(r)
		}
		if r.Machine == m.ID {
			replica.ToPending(p.own(r), unassigned, p.now)
		}
	}
}

// mayHold are the replicas that may be on a machine or moving off it:
// every replica, unless the snapshot lists the machine's (it drains:
// Snapshot.Draining); then those and the ones the pass changed (a
// drained machine's terminate walked 60,000 replicas to find none).
// Callers check each; one may come twice.
func (p *Pass) mayHold(machine string) []*api.Replica {
	ids, listed := p.snap.Draining[machine]
	if !listed {
		return p.replicas
	}
	out := make([]*api.Replica, 0, len(ids)+len(p.mine))
	for _, id := range ids {
		if r := p.replica(id); r != nil {
			out = append(out, r)
		}
	}
	for r := range p.mine {
		if p.replica(r.ID) == r {
			out = append(out, r)
		}
	}
	return out
}

// launch adds a machine to the plan, and to the pass as a machine on its
// way, so that later steps count it (group sizes, spread domains).
func (p *Pass) launch(l Launch, template string) {
	l.ProviderKey = p.snap.Catalogs[l.Cluster].Key
	if it, ok := provisioner.FindInstanceType(p.snap.Catalogs[l.Cluster].Catalog, l.InstanceType); ok {
		l.Capacity = it.Resources()
	}
	p.plan.Launches = append(p.plan.Launches, l)
	m := &api.Machine{ID: placeholderPrefix + l.Key, Cluster: l.Cluster, Group: l.Group, InstanceType: l.InstanceType, Zone: l.Zone,
		CapacityType: l.CapacityType, PricePerHour: l.PricePerHour, JoinState: api.JoinProvisioning, FleetState: api.FleetReady,
		TemplateHash: template, CreatedAt: p.now, StateChangedAt: p.now, ProviderKey: l.ProviderKey, Capacity: l.Capacity}
	if cl := p.snap.Clusters[l.Cluster]; cl != nil {
		g, _ := cl.Group(l.Group)
		m.Provider, m.Labels = cl.Spec.Provider.Name, g.Labels
	}
	p.machines = append(p.machines, m)
	p.mineMachines[m] = true
}

// placeholderPrefix marks the pass's own machines on their way, which the
// store does not have yet.
const placeholderPrefix = "launch:"

func isPlaceholder(m *api.Machine) bool { return strings.HasPrefix(m.ID, placeholderPrefix) }

// drain starts draining a machine.
func (p *Pass) drain(m *api.Machine, why string) {
	deadline := p.now.Add(p.cfg.DrainDeadline)
	if changed, err := fleet.Drain(p.ownMachine(m), why, deadline, p.now); err == nil && changed {
		p.plan.Drains = append(p.plan.Drains, Drain{Machine: m.ID, Reason: why, Deadline: deadline})
	}
}

// forget drops memory of what no longer exists: machines gone, groups and
// clusters removed, offerings whose miss has expired.
func (p *Pass) forget() {
	groups := map[string]bool{}
	for name, cl := range p.snap.Clusters {
		for _, g := range cl.Spec.CapacityGroups {
			groups[planner.Key(name, g.GroupID)] = true
		}
	}
	isGroup := func(k string) bool { return groups[k] }
	keepKeys(p.mem.Desired, isGroup)
	keepKeys(p.mem.Backoff, isGroup)
	keepKeys(p.mem.Rollouts, isGroup)
	keepKeys(p.mem.Conditions, func(k string) bool {
		cluster, _, _ := strings.Cut(k, "/")
		return p.snap.Clusters[cluster] != nil
	})
	isService := func(k string) bool { name, _, _ := strings.Cut(k, "/"); return p.services[name] != nil }
	keepKeysOwned(&p.mem.Deployments, &p.owns.deployments, isService)
	keepKeysOwned(&p.mem.Revisions, &p.owns.revisions, isService)
	keepKeys(p.mem.Promotions, isService)
	keepKeys(p.mem.Unavailable, func(k string) bool { return !p.reached(p.mem.Unavailable[k]) })
	keepKeysOwned(&p.mem.IdleSince, &p.owns.idle, func(id string) bool { m := p.machine(id); return m != nil && m.Live() })
	keepKeys(p.mem.Terminations, func(id string) bool {
		m := p.machine(id)
		return m != nil && m.FleetState == api.FleetTerminating
	})
}

func keepKeys[V any](m map[string]V, keep func(string) bool) {
	for k := range m {
		if !keep(k) {
			delete(m, k)
		}
	}
}
