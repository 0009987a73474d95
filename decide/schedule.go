package decide

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/planner"
	"github.com/gantry-dev/gantry/replica"
	"github.com/gantry-dev/gantry/scheduler"
)

// view is the pass's model of the target's fleet for the scheduler and
// the planner: every live machine that is not going away, with its
// replicas booked.
type view struct {
	clusters map[string]bool
	// byID are the machines of the view, in p.machines' order: by id,
	// the first sorted of them, then those the pass launched.
	byID   []*planner.Machine
	sorted int
	// all are the entries byID points at, in the same order (in the
	// scratch); patched: they are the last pass's view's, each booked
	// afresh or kept as it was (patchableView); built: which view the
	// scratch held when this one was made (Scratch.views).
	all     []planner.Machine
	patched bool
	built   uint64
	// ids are byID's ids (set before the booking sets their machines).
	ids []string
	// joined are schedulable; launching count as spread domains. Listed
	// when first read (joinedMachines, launchingMachines): a pass that
	// schedules nothing reads neither (at 10,000 machines each pass
	// allocated and filled a list of every machine).
	joined, launching []*scheduler.Machine
	listed            bool
	zones             map[string][]string
	// lists say which list each machine is in.
	lists []machineList
	// booked: the machines are the booking's own, which the pass must not
	// change: it places on copies, made once it places (ownMachines).
	// copies are the copies once made, each at its machine's place, and
	// ownsAll says every machine is one (a pass may copy only those a
	// session may place on: ownMachinesThat).
	booked  bool
	copies  []scheduler.Machine
	ownsAll bool
	// owned marks the machines copied; rooms and bookedAt are the
	// booking's rooms and machines, for the view's first machines
	// (scheduler.Room: read without touching each machine).
	owned    []bool
	rooms    []scheduler.Room
	bookedAt []*bookedMachine
	// restored: the view is the last pass's, whose touched entries it put
	// back; from, when it was spliced from the last pass's, is the place
	// each entry had there (nil: each is where it was).
	restored bool
	from     []int32
	// touched are the places of the entries the pass changed after it
	// booked them (a copy taken, a replica placed or evicted), but for
	// the idle times: the next pass that patches the view puts them back
	// as booked (patchableView).
	touched []int32
	// rewritten are the places of the entries the booking wrote, noted
	// when it patched the last pass's view; walk and
	// walkedBefore are what walkView found of this view's entries and of
	// the last pass's, which these are (idlewalk.go).
	rewritten          []int32
	walk, walkedBefore *idleWalk
	// asBooked: the view lists the machines the last booking did, in its
	// order, and each as scheduling and the planner saw it then
	// (sameMachine): machines that changed since changed nothing they
	// read.
	asBooked bool
}

// ownMachines gives the pass its own copies of the booked machines
// before it places or moves a replica: the booking keeps them as booked
// for the next pass. Only such a pass copies them (a copy of every
// machine was a twelfth of a steady pass at 10,000 machines, most of
// which place nothing). What the pass read of the booking's machines
// before is what the copies hold.
func (p *Pass) ownMachines(v *view) { p.ownMachinesThat(v, nil) }

// ownMachinesThat copies the booked machines that may take what asks
// counted (nil: every one) and are not copies yet; the machines are
// listed again when next asked for. Which may is read from the
// booking's rooms, not from each machine (a cache miss for each of
// 10,000 machines in every pass that placed), by a call the compiler
// inlines (a function value called for each machine was most of the
// walk).
func (p *Pass) ownMachinesThat(v *view, asks *scheduler.Asks) {
	if !v.booked || v.ownsAll {
		return
	}
	if v.copies == nil {
		v.copies = p.snap.Scratch.schedulerMachines(len(v.byID)) // in one allocation, not one for each of 50,000
		v.owned = make([]bool, len(v.byID))
	}
	v.ownsAll = true
	for i := range v.byID {
		switch {
		case v.owned[i]:
		case asks != nil && !asks.MayTakeRoom(v.roomOf(i)):
			v.ownsAll = false
		default:
			pm := v.byID[i]
			pm.Machine.ShareInto(&v.copies[i])
			pm.Machine, v.owned[i] = &v.copies[i], true
			v.touched = append(v.touched, int32(i))
		}
	}
	v.listed = false
}

// roomOf is the room of the view's machine at place i as booked.
func (v *view) roomOf(i int) scheduler.Room {
	if i < len(v.rooms) {
		return v.rooms[i]
	}
	return v.byID[i].Machine.Room() // one the pass launched
}

// plannerRooms are the rooms of the view's machines as the planner finds
// them, written into *buf: as booked, but for those the pass changed
// since (touched: it placed on or took from their copies) and those it
// launched, which are read.
func (v *view) plannerRooms(buf *[]scheduler.Room) []scheduler.Room {
	rooms := append((*buf)[:0], v.rooms[:min(len(v.rooms), len(v.byID))]...)
	for i := len(rooms); i < len(v.byID); i++ {
		rooms = append(rooms, v.byID[i].Machine.Room())
	}
	for _, i := range v.touched {
		rooms[i] = v.byID[i].Machine.Room()
	}
	*buf = rooms
	return rooms
}

// bookedJoined are the joined machines as booked (never changed: the
// pass places on copies).
func (v *view) bookedJoined() []*scheduler.Machine {
	out := make([]*scheduler.Machine, 0, len(v.byID))
	for i, pm := range v.byID {
		if v.lists[i] != listJoined {
			continue
		}
		if v.owned != nil && v.owned[i] {
			out = append(out, v.bookedAt[i].pm.Machine)
		} else {
			out = append(out, pm.Machine)
		}
	}
	return out
}

// listMachines lists the joined and the launching machines.
func (v *view) listMachines() {
	if v.joined == nil {
		v.joined = make([]*scheduler.Machine, 0, len(v.byID))
	}
	v.joined, v.launching, v.listed = v.joined[:0], v.launching[:0], true
	for i, pm := range v.byID {
		switch v.lists[i] {
		case listJoined:
			v.joined = append(v.joined, pm.Machine)
		case listLaunching:
			v.launching = append(v.launching, pm.Machine)
		}
	}
}

// joinedMachines are the joined machines, listed once asked for.
func (v *view) joinedMachines() []*scheduler.Machine {
	if !v.listed {
		v.listMachines()
	}
	return v.joined
}

// launchingMachines are the machines on their way.
func (v *view) launchingMachines() []*scheduler.Machine {
	if !v.listed {
		v.listMachines()
	}
	return v.launching
}

func (p *Pass) buildView(clusters []string) *view {
	v := &view{clusters: map[string]bool{}, zones: p.zonesOf(clusters)}
	for _, name := range clusters {
		v.clusters[name] = true
	}
	p.splicedFrom = nil
	sk := p.keptSkeleton(clusters)
	if sk == nil {
		sk = p.updatedSkeleton(clusters)
	}
	if sk == nil {
		sk = p.splicedSkeleton(clusters)
	}
	if sk == nil {
		sk = p.takeSkeleton(clusters)
	}
	cls := make([]*api.Cluster, len(clusters))
	for i, name := range clusters {
		cls[i] = p.snap.Clusters[name]
	}
	n := len(sk.entries)
	// By id, but for machines the pass launched (at the end).
	v.sorted = sort.Search(n, func(k int) bool { return int(sk.entries[k].at) >= p.sortedMachines })
	if last, from := p.patchableView(sk, v.sorted); last != nil {
		p.restoreTouched(last)
		v.all, v.byID, v.patched, v.restored = last.all, last.byID, true, len(last.touched) > 0
		v.walkedBefore = last.walk
		if from != nil {
			v.all, v.byID, v.from = nil, splicedEntries(last.byID, from), from
		}
	} else {
		// Each list in one allocation, not grown to 50,000 by appends;
		// the booking sets every entry.
		v.all = p.snap.Scratch.plannerMachines(n)[:n]
		v.byID = room(&p.snap.Scratch.of().byID, n)
		for k := range v.all {
			v.byID = append(v.byID, &v.all[k])
		}
	}
	if sc := p.snap.Scratch; sc != nil {
		sc.views++ // the scratch holds this view now
		v.built = sc.views
	}
	p.view = v
	// Shared with the skeleton, which never changes: clipped, so that an
	// append copies.
	v.ids = slices.Clip(sk.ids)
	lists := slices.Clip(sk.lists)
	p.skeleton = sk
	p.plan.Booked = p.bookReplicas(v, lists, sk.entries, cls)
	v.lists = lists
	return v
}

// patchableView is the last pass's view, for this pass to patch rather
// than copy every machine's booked entry into a view of its own (nil:
// it builds one). The scratch holds it as that pass left it: no pass
// built another view there since and no one cleared it. That pass
// changed none of its entries but the idle machines' times, which
// walkView sets again, and those it noted (touched), which the patch
// puts back as booked (restoreTouched). And it listed
// the machines this view does, in the same order: the booking's merge
// then takes each machine's entry from where it was (in place), so each
// entry of the view not booked afresh is already the booking's.
//
// Or it listed the machines of the skeleton this one was spliced from
// (machines made and deleted since: splicedSkeleton), none launched by
// either pass: each kept entry then moves to its machine's new place
// (from: the place each had, -1 for a machine new to the view), as the
// booking's merge finds it, and those new get entries of their own (a
// view built afresh, each entry copied from the booking, took half of
// each pass that launched or ended a machine at 10,000 machines).
func (p *Pass) patchableView(sk *viewSkeleton, sorted int) (*view, []int32) {
	prev, sc := p.snap.Booked, p.snap.Scratch
	if prev == nil || prev.view == nil || sc == nil || prev.view.built != sc.views {
		return nil, nil
	}
	last := prev.view
	switch {
	case sameMachines(prev.skeleton, sk) && len(last.byID) == len(sk.entries):
		return last, nil
	case p.splicedFrom != nil && len(p.splicedFrom) == len(sk.entries) && sorted == len(sk.entries) &&
		last.sorted == len(last.byID) && len(last.byID) == len(prev.skeleton.entries):
		return last, p.splicedFrom
	}
	return nil, nil
}

// splicedEntries are the entries of a view spliced from the last
// (patchableView): each kept one moved to its new place, each new one
// made.
func splicedEntries(last []*planner.Machine, from []int32) []*planner.Machine {
	made := 0
	for _, k := range from {
		if k < 0 {
			made++
		}
	}
	fresh := make([]planner.Machine, made)
	byID := make([]*planner.Machine, len(from))
	for i, k := range from {
		if k >= 0 {
			byID[i] = last[k]
		} else {
			byID[i], fresh = &fresh[0], fresh[1:]
		}
	}
	dropLeft(last, from)
	return byID
}

// dropLeft empties the entries of last that the spliced view does not
// take over (from): a machine's entry points to its booked machine, and
// through it to the array of every machine of the layout it was booked
// in (layOut), which it would keep from the collector for as long as
// the scratch keeps the entry. Both views list their machines by id, so
// from takes its entries in order; were it not, nothing is dropped
// rather than an entry still taken.
func dropLeft(last []*planner.Machine, from []int32) {
	next := 0
	for _, k := range from {
		if k >= 0 {
			if int(k) < next {
				return
			}
			next = int(k) + 1
		}
	}
	drop := func(entries []*planner.Machine) {
		for _, pm := range entries {
			*pm = planner.Machine{}
		}
	}
	next = 0
	for _, k := range from {
		if k >= 0 {
			drop(last[next:k])
			next = int(k) + 1
		}
	}
	drop(last[next:])
}

// restoreTouched puts the entries the last pass changed after it booked
// them (it placed on some of its machines: view.touched) back as its
// booking has them, so that each entry of the patched view is the
// booking's or booked afresh, as for a view of a pass that placed
// nothing (a pass after one that placed rewrote every entry).
func (p *Pass) restoreTouched(last *view) {
	prev := p.snap.Booked
	for _, i := range last.touched {
		e := prev.machines[i].pm
		e.Replicas = slices.Clip(e.Replicas) // the pass's appends copy
		*last.byID[i] = e
	}
}

// patchable: the next pass may patch the view (patchableView): the
// entries the pass changed after it booked them are noted, each of a
// machine of its booking (none it launched), and not every one (a copy
// of every machine taken: rewriting each is as quick).
func (v *view) patchable() bool {
	if v.ownsAll {
		return false
	}
	for _, i := range v.touched {
		if int(i) >= v.sorted {
			return false
		}
	}
	return true
}

// placeBefore is the place entry i of a patched view had in the last
// pass's (-1: none).
func (v *view) placeBefore(i int) int32 {
	if v.from == nil {
		return int32(i)
	}
	return v.from[i]
}

// changed is the view's entry of the machine of id, to change after the
// booking (nil: none), noted as touched.
func (v *view) changed(id string) *planner.Machine {
	i, ok := v.position(id)
	if !ok {
		return nil
	}
	v.touched = append(v.touched, int32(i))
	return v.byID[i]
}

// zonesOf are the zones of each cluster's capacity groups.
func (p *Pass) zonesOf(clusters []string) map[string][]string {
	zones := map[string][]string{}
	for _, name := range clusters {
		for _, g := range p.snap.Clusters[name].Spec.CapacityGroups {
			zones[name] = append(zones[name], g.Zones...)
		}
	}
	return zones
}

// scheduleSpread places the replicas with a spread rule on the joined
// machines and those on their way (onTheirWay), as spread domains.
func (p *Pass) scheduleSpread(v *view, spread []scheduler.Replica) (scheduler.Result, map[string]bool) {
	if len(spread) == 0 { // not a copy of 50,000 machines to place nothing
		return scheduler.Schedule(nil, nil), nil
	}
	domains := slices.Clone(v.joinedMachines())
	onTheirWay := map[string]bool{}
	for _, m := range v.launchingMachines() {
		domains = append(domains, m.Clone())
		onTheirWay[m.ID] = true
	}
	return p.snap.Scratch.of().sched.Schedule(domains, spread), onTheirWay
}

// schedule places pending replicas (and replicas moving off draining
// machines) on joined machines. Replicas with a spread rule count the
// machines on their way as domains too: one placed there waits for it to
// join instead of piling onto the machines already there. It returns the
// replicas still unplaced and why.
func (p *Pass) schedule(v *view) ([]scheduler.Replica, whyWaiting) {
	var plain, spread []scheduler.Replica
	build := schedReplicas{p: p, zones: v.zones}
	draining := p.drainingMachines()
	var among []int // the candidates' positions; nil: every replica
	if p.snap.Unplaced != nil {
		if draining == nil {
			among = p.positionsAmong(p.snap.Unplaced)
		} else if ids, ok := p.drainingIDs(); ok {
			among = p.positionsAmong(append(slices.Clip(p.snap.Unplaced), ids...))
		}
	}
	if among != nil { // mostly without a spread rule: room for all, not grown by doubling
		plain = make([]scheduler.Replica, 0, len(among))
	}
	for k := range candidateCount(among, p.replicas) {
		i := k
		if among != nil {
			i = among[k]
		}
		r := p.replicas[i]
		if !needsPlace(r, draining) {
			continue
		}
		svc, ok := p.services[r.Service]
		if !ok || !v.clusters[r.Cluster] {
			continue
		}
		sr := build.of(r, svc)
		if len(sr.Spread) > 0 {
			spread = append(spread, sr)
		} else {
			plain = append(plain, sr)
		}
	}
	res, explain := p.schedulePlain(v, plain, len(spread) > 0)
	p.book(v, res, placedOf(plain, res.Placements))
	spreadRes, onTheirWay := p.scheduleSpread(v, spread)
	var placed []scheduler.Placement
	for _, pl := range spreadRes.Placements {
		if onTheirWay[pl.MachineID] {
			// The planner places it on that machine too, and says it waits.
			spreadRes.Unplaced[pl.ReplicaID] = joinWait(pl.MachineID)
			continue
		}
		placed = append(placed, pl)
	}
	spreadRes.Placements = placed
	p.book(v, spreadRes, placedOf(spread, placed))
	reasons := whyWaiting{known: unionOf(res.Unplaced, spreadRes.Unplaced), explain: explain}
	unplaced := make([]scheduler.Replica, 0, len(res.Unplaced)+len(spreadRes.Unplaced))
	for k, result := range []scheduler.Result{res, spreadRes} {
		unplaced = appendUnplaced(unplaced, [][]scheduler.Replica{plain, spread}[k], result.Unplaced)
		for _, e := range result.Evictions {
			if r := p.replica(e.ReplicaID); r != nil {
				if svc := p.services[r.Service]; svc != nil {
					unplaced = append(unplaced, toSchedReplica(r, svc, p.specOf(r, svc), v.zones[r.Cluster]))
				}
			}
		}
	}
	byID := func(a, b scheduler.Replica) int { return strings.Compare(a.ID, b.ID) }
	if !slices.IsSortedFunc(unplaced, byID) { // in the store's order, by service and id: mostly by id too
		slices.SortFunc(unplaced, byID)
	}
	return unplaced, reasons
}

// schedulePlain places the replicas without spread rules on the joined
// machines. When they ask nothing of the machines they do not go on
// (scheduler.Asks) and none waits with a spread rule, the pass copies,
// and a session sorts and indexes, only the machines that could take
// one of them: the others would take none (at 10,000 machines, mostly
// full, copying and sorting every machine was most of a pass that placed
// a few replicas). That session explains nothing: what it leaves
// unplaced is explained from the booked machines, as a session of every
// machine would, only if asked (explanations).
func (p *Pass) schedulePlain(v *view, plain []scheduler.Replica, spreadToo bool) (scheduler.Result, *explanations) {
	sched := &p.snap.Scratch.of().sched
	if len(plain) == 0 && !spreadToo {
		return sched.Schedule(nil, nil), nil
	}
	asks := scheduler.NewAsks()
	if spreadToo || !v.booked || v.copies != nil || slices.ContainsFunc(plain, func(r scheduler.Replica) bool { return !asks.Add(&r) }) {
		p.ownMachines(v)
		return sched.Schedule(v.joinedMachines(), plain), nil
	}
	p.ownMachinesThat(v, &asks)
	var receivers []*scheduler.Machine
	for i, owned := range v.owned {
		if owned && v.lists[i] == listJoined {
			receivers = append(receivers, v.byID[i].Machine)
		}
	}
	res := sched.NewSession(receivers).Fill(plain)
	if len(res.Unplaced) == 0 {
		return res, nil
	}
	return res, &explanations{machines: v.bookedJoined, pending: plain, unplaced: res.Unplaced}
}

// whyWaiting are why the replicas scheduling left unplaced wait: known,
// but for those explain explains.
type whyWaiting struct {
	known   map[string]string
	explain *explanations
}

// of is why the replica of id waits (false: scheduling placed it, or
// did not try).
func (w whyWaiting) of(id string) (string, bool) {
	if w.explain != nil {
		if _, ok := w.explain.unplaced[id]; ok {
			why, ok := w.explain.reasons()[id]
			return why, ok
		}
	}
	why, ok := w.known[id]
	return why, ok
}

// explanations explain the replicas a session of some machines left
// unplaced, once asked, from a session of every machine as they were
// before it (the booking's: never changed), which places the same and
// explains why each replica left fits nowhere ("0/N machines fit: …").
// Most passes never ask: the planner tells those replicas why they wait.
type explanations struct {
	machines func() []*scheduler.Machine
	pending  []scheduler.Replica
	unplaced map[string]string
	found    map[string]string
}

func (e *explanations) reasons() map[string]string {
	if e.found == nil {
		machines := e.machines()
		copies := make([]*scheduler.Machine, len(machines))
		for i, m := range machines {
			copies[i] = m.Share()
		}
		e.found = scheduler.Schedule(copies, e.pending).Unplaced
	}
	return e.found
}

// unionOf is a and b in one map: one of them when the other is empty (a
// fleet's launch has tens of thousands unplaced each pass, mostly
// without spread rules). The maps are the scheduler's own, only read
// after.
func unionOf(a, b map[string]string) map[string]string {
	switch {
	case len(b) == 0 && a != nil:
		return a
	case len(a) == 0 && b != nil:
		return b
	}
	out := make(map[string]string, len(a)+len(b))
	maps.Copy(out, a)
	maps.Copy(out, b)
	return out
}

// placedOf are the replicas among rs that placements place, by id (a
// fleet's launch schedules tens of thousands, and places few of them a
// pass).
func placedOf(rs []scheduler.Replica, placements []scheduler.Placement) map[string]scheduler.Replica {
	if len(placements) == 0 {
		return nil
	}
	out := make(map[string]scheduler.Replica, len(placements))
	for _, pl := range placements {
		out[pl.ReplicaID] = scheduler.Replica{}
	}
	for _, r := range rs {
		if _, placed := out[r.ID]; placed {
			out[r.ID] = r
		}
	}
	return out
}

// appendUnplaced appends the replicas among rs that unplaced names, in
// rs's order.
func appendUnplaced(out, rs []scheduler.Replica, unplaced map[string]string) []scheduler.Replica {
	if len(unplaced) == 0 {
		return out
	}
	for _, r := range rs {
		if _, ok := unplaced[r.ID]; ok {
			out = append(out, r)
		}
	}
	return out
}

// candidateCount is how many replicas schedule walks: those at the
// positions among, or all of them when among is nil.
func candidateCount(among []int, replicas []*api.Replica) int {
	if among != nil {
		return len(among)
	}
	return len(replicas)
}

// needsPlace: pending, or on a draining machine and not yet moving.
func needsPlace(r *api.Replica, draining map[string]bool) bool {
	return r.Machine == "" || (draining[r.Machine] && r.PreviousMachine == "")
}

// drainingMachines are the ids of the machines draining (usually none:
// the replicas they hold are looked up only then).
func (p *Pass) drainingMachines() map[string]bool {
	var ids map[string]bool
	for _, m := range p.drainingCandidates() {
		if m.FleetState == api.FleetDraining {
			if ids == nil {
				ids = map[string]bool{}
			}
			ids[m.ID] = true
		}
	}
	return ids
}

// book records a scheduling result: evictions, then placements, on the
// replicas, the plan and the view (the planner must see them too).
func (p *Pass) book(v *view, res scheduler.Result, byID map[string]scheduler.Replica) {
	for _, e := range res.Evictions {
		r := p.replica(e.ReplicaID)
		if r == nil || r.Machine != e.MachineID {
			continue
		}
		p.plan.Evictions = append(p.plan.Evictions, Eviction{Replica: r.ID, Machine: e.MachineID, By: e.PreemptedBy})
		replica.ToPending(p.own(r), "preempted by higher-priority replica "+e.PreemptedBy, p.now)
		if pm := v.changed(e.MachineID); pm != nil {
			pm.Replicas = withoutReplica(pm.Replicas, e.ReplicaID)
		}
	}
	for _, pl := range res.Placements {
		r, m := p.replica(pl.ReplicaID), p.machine(pl.MachineID)
		if r == nil || m == nil {
			continue
		}
		r = p.own(r)
		placement := replica.Placement{Machine: m.ID, GPUs: pl.GPUs, TEE: pl.TEE, Note: pl.Note, Address: p.replicaAddress(m)}
		from := r.Machine
		if err := replica.Assign(r, placement, from != "", p.now); err != nil {
			continue
		}
		p.plan.Assignments = append(p.plan.Assignments, Assignment{Replica: r.ID, Placement: placement, From: from})
		p.plan.Capacity.Placements = append(p.plan.Capacity.Placements, planner.ReplicaPlacement{Replica: r.ID, Machine: m.ID, GPUs: pl.GPUs, TEE: pl.TEE, Note: pl.Note})
		if pm := v.changed(pl.MachineID); pm != nil {
			sr := byID[pl.ReplicaID]
			pm.Replicas = append(pm.Replicas, sr)
			pm.AsksKnown = false // its replicas are read instead
			// A resident from now on: later sessions of the pass see its
			// labels (affinity) and may preempt it like any other.
			pm.Residents = append(pm.Residents, scheduler.Resident{Replica: &sr, Priority: sr.Priority, GPUs: pl.GPUs})
		}
	}
}

// withoutReplica is rs without id, as a copy: residents point into rs.
func withoutReplica(rs []scheduler.Replica, id string) []scheduler.Replica {
	return slices.DeleteFunc(slices.Clone(rs), func(r scheduler.Replica) bool { return r.ID == id })
}

// repairSpread moves replicas of services whose spread machine churn left
// violated (a lost machine's replicas all rescheduled onto one, say),
// new copy first, at most MaxSpreadMoves per pass, and only while every
// replica of the service runs.
func (p *Pass) repairSpread(v *view) {
	budget := p.cfg.MaxSpreadMoves
	var names []string
	for name, svc := range p.services {
		if len(svc.Spec.Placement.Spread) > 0 {
			names = append(names, name)
		}
	}
	if budget <= 0 || len(names) == 0 {
		return
	}
	sort.Strings(names)
	bySvc := groupByService(p.replicas)
	for _, name := range names {
		svc := p.services[name]
		if budget <= 0 || len(bySvc[name]) == 0 || !v.clusters[svc.Spec.Cluster] ||
			p.mem.Deployments[name].State != api.DeployComplete { // a deployment places replicas anew anyway
			continue
		}
		if !slices.ContainsFunc(bySvc[name], func(r *api.Replica) bool { return !replica.Available(r) }) && p.moveForSpread(v, svc, bySvc[name]) {
			budget--
		}
	}
}

// moveForSpread moves one replica from the fullest spread domain to the
// emptiest, if a rule is violated and a machine there has room.
func (p *Pass) moveForSpread(v *view, svc *api.Service, replicas []*api.Replica) bool {
	sample := toSchedReplica(replicas[0], svc, p.specOf(replicas[0], svc), v.zones[svc.Spec.Cluster])
	var eligible []*scheduler.Machine
	for _, m := range v.joinedMachines() {
		if scheduler.Eligible(m, sample) == "" {
			eligible = append(eligible, m)
		}
	}
	for _, rule := range svc.Spec.Placement.Spread {
		domainOf := func(m *scheduler.Machine) string {
			if rule.Key == api.SpreadZone {
				return m.Zone
			}
			return m.ID
		}
		count := map[string]int{}
		for _, m := range eligible {
			count[domainOf(m)] += 0
		}
		for _, r := range replicas {
			if m := v.machine(r.Machine); m != nil {
				count[domainOf(m.Machine)]++
			}
		}
		fullest, emptiest := extremes(count)
		if fullest == "" || count[fullest]-count[emptiest] <= rule.MaxSkew {
			continue
		}
		from := lastReplicaIn(replicas, func(r *api.Replica) bool {
			m := v.machine(r.Machine)
			return m != nil && domainOf(m.Machine) == fullest
		})
		for _, target := range eligible {
			sr := toSchedReplica(from, svc, p.specOf(from, svc), v.zones[svc.Spec.Cluster])
			if domainOf(target) != emptiest || scheduler.Fits(target, sr) != "" {
				continue
			}
			return p.move(v, from, sr, target, fmt.Sprintf("spread %s maxSkew %d: %d replica(s) in %s, %d in %s", rule.Key, rule.MaxSkew, count[fullest], fullest, count[emptiest], emptiest))
		}
	}
	return false
}

// move places a running replica on target, its old copy running until the
// new one does; the scheduler books it (GPU devices, TEE runtime).
func (p *Pass) move(v *view, r *api.Replica, sr scheduler.Replica, target *scheduler.Machine, why string) bool {
	p.ownMachines(v) // the move books on the pass's copy of target, not the booking's
	target = v.machine(target.ID).Machine
	res := scheduler.Schedule([]*scheduler.Machine{target}, []scheduler.Replica{sr})
	if len(res.Placements) != 1 {
		return false
	}
	pl := res.Placements[0]
	placement := replica.Placement{Machine: target.ID, GPUs: pl.GPUs, TEE: pl.TEE, Note: pl.Note, Address: p.replicaAddress(p.machine(target.ID))}
	from := r.Machine
	if err := replica.Assign(p.own(r), placement, true, p.now); err != nil {
		return false
	}
	pm := v.changed(target.ID)
	pm.Replicas = append(pm.Replicas, sr)
	pm.AsksKnown = false
	p.plan.Assignments = append(p.plan.Assignments, Assignment{Replica: r.ID, Placement: placement, From: from, Why: why})
	return true
}

func extremes(count map[string]int) (fullest, emptiest string) {
	keys := make([]string, 0, len(count))
	for k := range count {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if fullest == "" || count[k] > count[fullest] {
			fullest = k
		}
		if emptiest == "" || count[k] < count[emptiest] {
			emptiest = k
		}
	}
	return fullest, emptiest
}

func lastReplicaIn(rs []*api.Replica, in func(*api.Replica) bool) *api.Replica {
	var last *api.Replica
	for _, r := range rs {
		if in(r) && (last == nil || r.Index > last.Index) {
			last = r
		}
	}
	return last
}
