package decide

import (
	"cmp"
	"encoding/json"
	"maps"
	"reflect"
	"slices"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/planner"
	"github.com/gantry-dev/gantry/scheduler"
)

// Booking is what a pass booked on the machines of its view: each
// machine as the scheduler sees it with the replicas running there,
// before the pass placed anything. The caller keeps a plan's Booking and
// hands it to the next pass (Snapshot.Booked) with what changed since
// (Snapshot.Changed). The next pass books afresh only the machines whose
// own fields changed or that a changed replica, service, cluster or
// revision touches, and takes the others as they were: booking every
// replica took a third of a pass at 500,000 replicas, and walking them
// all to find the few machines a change touched took most of the rest.
// It is a memo: a pass decides the same with it or without it (the
// decide harness decides every pass both ways and compares). A pass
// consumes the Booking it is handed: its own Booking may take over the
// same list of machines, rewritten (hand each to one pass only). The
// machines themselves are never changed: a pass takes copies of them
// that copy their counts before they change them
// (scheduler.Machine.Share).
type Booking struct {
	// machines are the view's machines as booked (none the pass
	// launched), by id; ids are their ids, in a list of their own: the
	// next pass's merge with its view reads them alone (a walk of 10,000
	// machines' entries a pass was a cache miss each).
	machines []*bookedMachine
	ids      []string
	// lists are the machines' lists (as their entries have them), in a
	// list of their own too: the merge compares each with the view's.
	lists []machineList
	// elsewhere are the running replicas on machines outside the view
	// (draining, stopped, lost, of another target), by machine: booked
	// when their machine comes into it.
	elsewhere map[string][]*api.Replica
	// runs are what each run's rules were built from.
	runs map[run]runInputs
	// own are the replicas the pass itself changed before it booked
	// (copied, made, deleted), with the machines they were booked on ("":
	// none): the store may not hold what the pass did (its act may fail),
	// so the next pass books them again.
	own map[string]string
	// ownMachines are the machines the pass changed (the store may not
	// hold what it did either), and providers what it knew of the
	// providers (a machine not joined yet runs its provider's runtimes).
	ownMachines map[string]bool
	providers   map[string]ProviderInfo
	// quiet are the services whose steps decided nothing, and secrets the
	// Secrets' revisions the pass read (quiet.go); tallies the complete
	// deployments' counts (deploytally.go).
	quiet   map[string]quietService
	secrets map[string]string
	tallies map[string]*deployTally
	// hashes are the services' revision hashes (revisionhash.go).
	hashes map[string]string
	// capacity: what the pass's scheduling and planner found, when it
	// changed nothing (quietcapacity.go); reused: the pass took the last
	// pass's instead of scheduling and planning.
	capacity *quietCapacity
	reused   bool
	// reusedScheduling: the last pass's scheduling alone was taken.
	reusedScheduling bool
	// keptTallies: how many services' steps took the last pass's tally.
	keptTallies int
	// census: the pass's count of its machines, for the next pass while
	// none changes (census.go); skeleton what its view read of each
	// (skeleton.go).
	census   *fleetCensus
	skeleton *viewSkeleton
	// rooms are the machines' rooms, by place (scheduler.Machine.Room):
	// a pass chooses the machines it copies to place on from them, not
	// from each machine.
	rooms []scheduler.Room
	// view is the pass's view when the pass changed none of its machines,
	// for the next pass to patch (patchableView).
	view    *view
	patched bool
	// restored: the view patched was of a pass that placed, whose
	// changed entries the patch put back (restoreTouched); touchedOnly:
	// the pass booked only the machines a change touched (bookTouched).
	restored    bool
	touchedOnly bool
	// spliced: the view patched was of other machines (patchableView);
	// partlyWalked: walkView walked only the entries that could need it.
	spliced      bool
	partlyWalked bool
	// scattered counts the machines booked afresh, each in an allocation
	// of its own, since the booking's machines were last laid side by
	// side (layOut); laid is where this pass laid them, if it did.
	scattered int
	laid      []scheduler.Machine
}

// bookedEntries are room for the entries of the machines a pass books
// afresh, in one allocation.
type bookedEntries []bookedMachine

// of is the next entry, set.
func (e *bookedEntries) of(pm *planner.Machine, list machineList, replicas []*api.Replica) *bookedMachine {
	m := &(*e)[0]
	*e = (*e)[1:]
	*m = bookedMachine{pm: *pm, list: list, replicas: replicas}
	return m
}

type bookedMachine struct {
	pm   planner.Machine
	list machineList
	// replicas are the running replicas on the machine, in the order
	// booked (by service and id, retiring ones last), those of deleted
	// services too (not booked).
	replicas []*api.Replica
}

// run names the replicas of one service, revision and cluster, which
// share their rules.
type run struct{ service, hash, cluster string }

type runInputs struct {
	// revision: the memory held the run's revision (its spec, else the
	// service's).
	revision bool
	// rules are the run's rules as booked, encoded, with whether its
	// service was a failover group's ("": its service was gone). Encoded,
	// not shared: tests change their services' maps in place.
	rules string
}

// machineList is which of the view's lists a machine is on.
type machineList uint8

const (
	listNone machineList = iota
	listJoined
	listLaunching
)

// booker books the running replicas on a view's machines, from the last
// pass's Booking where it can.
type booker struct {
	p     *Pass
	v     *view
	lists []machineList
	// entries are what the view read of each machine, and cls its
	// clusters (entries name them by place).
	entries []skeletonEntry
	cls     []*api.Cluster
	// prev and changed are the last booking and what changed since (nil:
	// book every machine afresh).
	prev    *Booking
	changed *Changes
	// sameProviders: the providers are as the last booking knew them.
	sameProviders bool
	reused        []int32          // prev's machine each of v.byID's is taken from (-1: none)
	fresh         [][]*api.Replica // of v.byID: the replicas to book afresh
	dirty         []bool           // of v.byID: booked afresh
	// sparse, when the pass patches the booking in place
	// (patchesInPlace), holds the notes instead: the places of the
	// machines booked afresh, with their replicas; every other machine is
	// kept where it was.
	sparse map[int32][]*api.Replica
	// incoming are the changed replicas now on each machine; touched the
	// machines outside the view whose lists change.
	incoming map[string][]*api.Replica
	touched  map[string]bool
	build    schedReplicas
	next     *Booking
	// inPlace: the view lists the machines prev booked, in its order; the
	// next booking takes prev's list over (prev is the pass's to consume:
	// a new list of 50,000 booked machines each pass was 6 MB of garbage).
	inPlace bool
}

// bookReplicas books every running replica on its machine of the view,
// and returns the Booking to hand to the next pass (nil when the pass's
// replicas are not in the store's order).
func (p *Pass) bookReplicas(v *view, lists []machineList, entries []skeletonEntry, cls []*api.Cluster) *Booking {
	ordered := p.index.ordered && !slices.ContainsFunc(p.replicas[p.index.sorted:], onAMachine)
	b := &booker{p: p, v: v, lists: lists, entries: entries, cls: cls, incoming: map[string][]*api.Replica{}, touched: map[string]bool{},
		build: schedReplicas{p: p, zones: v.zones}, next: &Booking{own: map[string]string{}}}
	if ordered && p.snap.Booked != nil && p.snap.Changed != nil {
		b.prev, b.changed = p.snap.Booked, p.snap.Changed
		b.sameProviders = reflect.DeepEqual(b.prev.providers, p.snap.Providers)
		switch ids := b.changedReplicas(); {
		case ids == nil:
			b.prev, b.changed = nil, nil
		case b.patchesInPlace():
			b.collectTouched(ids)
		default:
			b.notesOnEach()
			b.collectChanged(ids)
		}
	}
	if b.prev == nil {
		b.notesOnEach()
		b.collectAll()
	}
	var next *Booking
	if b.sparse != nil {
		next = b.bookTouched()
	} else {
		next = b.book()
	}
	if !ordered {
		return nil
	}
	for r := range p.mine {
		if _, booked := next.own[r.ID]; !booked {
			next.own[r.ID] = ""
		}
	}
	for id := range p.deleting {
		if _, booked := next.own[id]; !booked {
			next.own[id] = ""
		}
	}
	next.quiet, next.secrets, next.tallies, next.hashes = p.quiet, maps.Clone(p.snap.SecretRevisions), p.tallies, p.hashes
	next.providers = maps.Clone(p.snap.Providers)
	return next
}

// onAMachine: a replica the pass made that is already on a machine.
func onAMachine(r *api.Replica) bool { return r.Machine != "" }

// collectAll lists every running replica on its machine.
func (b *booker) collectAll() {
	b.next.runs = map[run]runInputs{}
	b.next.elsewhere = map[string][]*api.Replica{}
	running := [][]*api.Replica{b.p.replicas, b.p.retiring} // retiring ones run until drained
	viewAt := make(map[string]int32, len(b.v.byID))
	for i, id := range b.v.ids {
		viewAt[id] = int32(i)
	}
	at := make([][]int32, len(running))
	counts := make([]int32, len(b.v.byID))
	for l, list := range running {
		at[l] = make([]int32, len(list))
		for k, r := range list {
			at[l][k] = -1
			if i, ok := viewAt[r.Machine]; ok && r.Machine != "" {
				at[l][k] = i
				counts[i]++
			}
		}
	}
	for i := range b.v.byID {
		b.dirty[i] = true
		if counts[i] > 0 {
			b.fresh[i] = make([]*api.Replica, 0, counts[i])
		}
	}
	for l, list := range running {
		for k, r := range list {
			switch i := at[l][k]; {
			case i >= 0:
				b.fresh[i] = append(b.fresh[i], r)
			case r.Machine != "":
				b.next.elsewhere[r.Machine] = append(b.next.elsewhere[r.Machine], r)
			}
		}
	}
}

// collectChanged lists, for the machines a change touched, the replicas
// on them now; the others are taken from the last booking.
func (b *booker) collectChanged(ids map[string]bool) {
	prev := b.prev
	sc := b.p.snap.Scratch.of()
	base, seen := reuse(&sc.base, len(b.v.byID)), reuse(&sc.seen, len(prev.machines))
	suspect := b.suspects()
	b.inPlace = len(prev.machines) == b.v.sorted
	// The last pass booked the machines of this pass's skeleton (kept, or
	// updated for the machines changed): each is where it was, without a
	// merge.
	same := sameMachines(prev.skeleton, b.p.skeleton) && b.inPlace
	walk := 0 // both lists are by id: a merge, not lookups
	spliced := b.followsSplice()
	asBooked := b.inPlace && b.v.sorted == len(b.v.byID)
	for i, id := range b.v.ids {
		j := i
		switch {
		case same:
		case spliced: // where the splice found it: no compare of ids
			if j = int(b.v.placeBefore(i)); j < 0 {
				j = len(prev.ids) // new to the view
			}
		default:
			// Mostly the same machine as the last pass's at walk: equal
			// strings (most often the same bytes) compare quicker than
			// ordered.
			for walk < len(prev.ids) && prev.ids[walk] != id && prev.ids[walk] < id {
				walk++
			}
			j = walk
		}
		b.inPlace = b.inPlace && j == i
		if i >= b.v.sorted || j == len(prev.ids) || !same && prev.ids[j] != id {
			base[i], b.dirty[i] = prev.elsewhere[id], true
			asBooked = false
			continue
		}
		seen[j] = true
		if suspect != nil && !suspect[i] && b.lists[i] == prev.lists[j] {
			b.reused[i] = int32(j)
		} else if sm := b.schedulerMachine(i); sameMachine(&sm, b.entries[i], b.lists[i], prev.machines[j]) {
			b.reused[i] = int32(j)
		} else {
			base[i], b.dirty[i], asBooked = prev.machines[j].replicas, true, false
		}
	}
	b.v.asBooked = asBooked && b.inPlace
	b.next.elsewhere = make(map[string][]*api.Replica, len(prev.elsewhere))
	for id, list := range prev.elsewhere {
		if _, in := b.v.position(id); !in {
			b.next.elsewhere[id] = list
		}
	}
	for j := range prev.machines {
		if m := prev.machines[j]; !seen[j] && len(m.replicas) > 0 {
			b.next.elsewhere[prev.ids[j]] = m.replicas
		}
	}
	b.place(ids)
	for i, id := range b.v.ids {
		if !b.dirty[i] {
			continue
		}
		// Each kept machine's entry is read only if a change touched it:
		// the walk reads the booking's compact lists alone.
		if j := b.reused[i]; j >= 0 {
			base[i] = prev.machines[j].replicas
		}
		b.fresh[i] = rebooked(base[i], ids, b.incoming[id])
	}
	b.rebookElsewhere(ids)
}

// followsSplice: the view was spliced from the last (view.placeBefore
// gives each machine's place in the last view), and the last booking
// listed that view's machines, so a machine's place in it is its place
// before (false: the merge finds them). At 10,000 machines, a merge by
// id of every pass that made or ended a machine was a fourteenth of a
// day's passes.
func (b *booker) followsSplice() bool {
	prev := b.prev
	return b.v.from != nil && prev.skeleton != nil && len(prev.ids) == len(prev.skeleton.ids) && len(b.v.from) == len(b.v.ids)
}

// changedReplicas are the ids of the replicas whose booking may differ
// from the last: changed in the store, booked from the last pass's own
// copies, copied, made or deleted by this pass, or of a service whose
// rules changed. nil: so many that booking afresh is quicker.
func (b *booker) changedReplicas() map[string]bool {
	ids := map[string]bool{}
	for id := range b.changed.Replicas {
		ids[id] = true
	}
	for id := range b.prev.own {
		ids[id] = true
	}
	for r := range b.p.mine {
		ids[r.ID] = true
	}
	for id := range b.p.deleting {
		ids[id] = true
	}
	b.next.runs = b.prev.runs // the pass consumes the booking it was handed
	for _, service := range b.staleServices() {
		for _, r := range b.p.snapshotReplicasOf(service) {
			ids[r.ID] = true
		}
	}
	if float64(len(ids)) > b.p.cfg.RebookShare*float64(b.p.snap.ReplicaCount()) {
		return nil
	}
	return ids
}

// place marks the machines the changed replicas were and are on, and
// lists each where it is now.
func (b *booker) place(ids map[string]bool) {
	for id := range ids {
		b.touch(b.changed.Replicas[id].Machine)
		b.touch(b.prev.own[id])
		if was := searchByID(b.p.snap.AllReplicas(), id); was != nil {
			b.touch(was.Machine)
		}
		if r := b.p.runningReplica(id); r != nil && r.Machine != "" {
			b.touch(r.Machine)
			b.incoming[r.Machine] = append(b.incoming[r.Machine], r)
		}
	}
}

// staleServices are the services some run of which has rules other than
// it was booked with. A run's rules are built again when what they are
// built from changed: the service (made, changed or deleted), its
// cluster (zones), or its revision (changed, made or dropped). The runs
// of stale services are forgotten; booking their replicas records them
// again. With no service, cluster or revision changed since the last
// pass, nor a revision made by this one, every run's rules are as the
// last pass found them: none is looked at.
func (b *booker) staleServices() []string {
	if len(b.changed.Services)+len(b.changed.Clusters) == 0 && !revisionChanged(b.changed.Memory) && !b.p.owns.revisions {
		return nil
	}
	var stale []string
	seen := map[string]bool{}
	for k, in := range b.prev.runs {
		if seen[k.service] {
			continue
		}
		key := RevisionKey(k.service, k.hash)
		_, revision := b.p.mem.Revisions[key]
		touched := revision != in.revision || b.changed.Services[k.service] || b.changed.Clusters[k.cluster] || b.changed.revision(key)
		if touched && b.rulesOf(k) != in.rules {
			seen[k.service] = true
			stale = append(stale, k.service)
		}
	}
	for k := range b.next.runs {
		if seen[k.service] {
			delete(b.next.runs, k)
		}
	}
	return stale
}

// touch marks the machine's booking changed.
func (b *booker) touch(machine string) {
	if machine == "" {
		return
	}
	if i, ok := b.v.position(machine); ok {
		b.markDirty(i)
		return
	}
	b.touched[machine] = true
}

// markDirty marks the view's machine i to be booked afresh.
func (b *booker) markDirty(i int) {
	if b.sparse != nil {
		b.sparse[int32(i)] = nil
		return
	}
	b.dirty[i] = true
}

// rebooked is a machine's replicas: those of base not changed, with
// those changed that are on it now, in the order a pass books them.
func rebooked(base []*api.Replica, changed map[string]bool, incoming []*api.Replica) []*api.Replica {
	out := make([]*api.Replica, 0, len(base)+len(incoming))
	for _, r := range base {
		if !changed[r.ID] {
			out = append(out, r)
		}
	}
	if len(incoming) == 0 {
		return out
	}
	out = append(out, incoming...)
	slices.SortFunc(out, inBookingOrder)
	return out
}

// inBookingOrder: the pass's replicas by service and id, then its
// retiring ones by service and id.
func inBookingOrder(a, b *api.Replica) int {
	return cmp.Or(cmp.Compare(retiringRank(a), retiringRank(b)), byServiceAndID(a, b))
}

func retiringRank(r *api.Replica) int {
	if r.RetiringSince != nil {
		return 1
	}
	return 0
}

// book books the listed replicas of the dirty machines, takes the others
// from the last booking, and returns the booking of this pass.
func (b *booker) book() *Booking {
	next := b.next
	afresh := 0
	for i, pm := range b.v.byID {
		if b.dirty[i] { // a kept machine a change touched too is booked afresh
			afresh++
			e := b.entries[i]
			*pm = planner.Machine{Machine: b.bookable(i), Joined: e.joined, CreatedAt: e.created.time(), Asks: scheduler.NewAsks(), AsksKnown: true}
			reserve(pm, len(b.fresh[i]))
		}
	}
	entries := make(bookedEntries, afresh)
	if b.inPlace { // each machine's entry is read (kept) before it is written
		next.machines, next.ids, next.lists = b.prev.machines[:0], b.prev.ids[:0], b.prev.lists[:0]
	} else {
		sorted := b.v.sorted
		spare := b.p.spares()
		next.machines, next.ids, next.lists = spareZeros(&spare.machines, sorted), spareCopy(&spare.ids, b.v.ids[:sorted]), spareCopy(&spare.lists, b.lists[:sorted])
	}
	for i, pm := range b.v.byID {
		list := b.fresh[i]
		if b.dirty[i] {
			b.bookMachine(pm, list)
			b.v.noteRewritten(i)
		} else if j := b.reused[i]; !b.v.patched || j != b.v.placeBefore(i) {
			// A patched view's entry of a machine kept is the booking's
			// already: not read again (a cache miss for each of 10,000
			// machines).
			b.v.noteRewritten(i)
			kept, e := b.prev.machines[j], b.entries[i]
			*pm = planner.Machine{Machine: kept.pm.Machine, Joined: e.joined, CreatedAt: e.created.time(), Replicas: slices.Clip(kept.pm.Replicas),
				DoNotDisrupt: kept.pm.DoNotDisrupt, Asks: kept.pm.Asks, AsksKnown: kept.pm.AsksKnown}
		}
		switch {
		case i >= b.v.sorted: // one the pass launched (a placeholder)
		case b.inPlace && !b.dirty[i]:
			// Its entry is where it was, as it was (a write of each of
			// 10,000 entries a pass rewrote them unchanged).
			next.machines, next.ids, next.lists = next.machines[:i+1], next.ids[:i+1], next.lists[:i+1]
		case b.inPlace:
			// The booking keeps each machine as booked; the pass places
			// on copies (ownMachines).
			next.machines = append(next.machines, entries.of(pm, b.lists[i], list))
			next.ids, next.lists = append(next.ids, b.v.ids[i]), append(next.lists, b.lists[i])
		case b.dirty[i]:
			next.machines[i] = entries.of(pm, b.lists[i], list)
		}
	}
	if !b.inPlace {
		b.copyKept(next.machines)
	}
	b.keepRooms(next, func(yield func(int) bool) {
		for i := range next.machines {
			if b.dirty[i] && !yield(i) {
				return
			}
		}
	})
	b.v.booked = true
	b.layOut(next)
	return next
}

// copyKept takes the last booking's entries of the machines kept into
// the booking's own list, in runs of machines side by side in both: they
// are as booked then (an entry built anew for each in turn was most of
// a pass that launched or ended a machine at 10,000 machines).
func (b *booker) copyKept(into []*bookedMachine) {
	for i := 0; i < len(into); {
		j := b.reused[i]
		if b.dirty[i] || j < 0 {
			i++
			continue
		}
		k := i + 1
		for k < len(into) && !b.dirty[k] && b.reused[k] == j+int32(k-i) {
			k++
		}
		copy(into[i:k], b.prev.machines[j:int(j)+k-i])
		i = k
	}
}

// layOut lays the booking's machines and their entries side by side,
// each in one allocation, in their order, once more than
// Config.LayOutShare of them were booked afresh since they last were (or
// all were, by one pass): each machine booked afresh is an allocation of
// its own, and over a day every one is, scattered over the heap, so that
// each walk of every machine (the planner's counts, its candidates and
// receivers, the scheduling's) missed the cache at each (a day of 10,000
// machines 148 -> 128 s side by side). The view's
// entries take the new places too. The machines are the booking's,
// never changed: they are copied as shared (a pass places on copies of
// them, which take their own counts first).
func (b *booker) layOut(next *Booking) {
	afresh := 0
	for i := range b.v.sorted {
		if b.dirty[i] {
			afresh++
		}
	}
	b.layOutAfter(next, afresh)
}

// layOutAfter is layOut once afresh of the booking's machines were
// booked afresh.
func (b *booker) layOutAfter(next *Booking, afresh int) {
	n := len(next.machines)
	if b.prev == nil || afresh == n {
		// Every machine booked now, one after the other: they lie in the
		// order they were allocated, as a layout would put them.
		next.scattered = 0
		return
	}
	next.scattered = b.prev.scattered + afresh
	if next.scattered == 0 || float64(next.scattered) <= b.p.cfg.LayOutShare*float64(n) {
		return
	}
	next.scattered = 0
	next.laid = make([]scheduler.Machine, n)
	entries := make([]bookedMachine, n) // the entries too: a view built afresh reads each
	for k, m := range next.machines {
		entries[k] = *m
		next.machines[k] = &entries[k]
		pm := &entries[k].pm
		pm.Machine.ShareInto(&next.laid[k])
		pm.Machine = &next.laid[k]
		b.v.byID[k].Machine = pm.Machine // the view lists the booking's machines first, in its order
	}
}

// LaidOut reports whether the pass laid its booking's machines side by
// side (layOut), each still where it laid it.
func (b *Booking) LaidOut() bool {
	if b == nil || b.laid == nil {
		return false
	}
	for k := range b.machines {
		if b.machines[k].pm.Machine != &b.laid[k] {
			return false
		}
	}
	return true
}

// bookMachine books a machine's replicas afresh.
func (b *booker) bookMachine(pm *planner.Machine, list []*api.Replica) {
	var svc *api.Service
	for _, r := range list {
		if svc == nil || svc.Metadata.Name != r.Service { // replicas come by service
			svc = b.p.services[r.Service]
		}
		b.record(r)
		if svc == nil {
			continue
		}
		sr := b.build.of(r, svc)
		if svc.Spec.Failover != nil {
			pm.DoNotDisrupt = true // a failover member's data lives on its machine
		}
		scheduler.Assign(pm.Machine, sr, r.GPUIndexes)
		pm.Replicas = append(pm.Replicas, sr)
		booked := &pm.Replicas[len(pm.Replicas)-1] // in its list: never moved, never changed
		pm.Asks.Add(booked)
		pm.Residents = append(pm.Residents, scheduler.Resident{Replica: booked, Priority: sr.Priority, GPUs: r.GPUIndexes})
		if pm.PlainResidents == len(pm.Residents)-1 && !booked.Teaches() {
			pm.PlainResidents++
		}
		if len(b.p.mine) > 0 && b.p.mine[r] {
			b.next.own[r.ID] = pm.ID
		}
	}
}

// record notes what r's run was booked from.
func (b *booker) record(r *api.Replica) {
	k := run{service: r.Service, hash: r.SpecHash, cluster: r.Cluster}
	if _, ok := b.next.runs[k]; ok {
		return
	}
	_, revision := b.p.mem.Revisions[RevisionKey(k.service, k.hash)]
	b.next.runs[k] = runInputs{revision: revision, rules: b.rulesOf(k)}
}

// rulesOf is a run's rules now, encoded ("": its service is gone).
func (b *booker) rulesOf(k run) string {
	svc := b.p.services[k.service]
	if svc == nil {
		return ""
	}
	sample := &api.Replica{Service: k.service, SpecHash: k.hash, Cluster: k.cluster}
	rules := toSchedReplica(sample, svc, b.p.specOf(sample, svc), b.v.zones[k.cluster]).Rules
	data, err := json.Marshal(struct {
		Rules    *scheduler.Rules
		Failover bool
	}{rules, svc.Spec.Failover != nil})
	if err != nil {
		panic("decide: encoding rules: " + err.Error()) // plain data: cannot fail
	}
	return string(data)
}

// reserve gives a machine booked afresh (with c replicas) its replica
// and resident lists their room: appended one by one, the lists of a
// 500,000-replica fleet allocated over a gigabyte per pass. Each list's
// capacity is its count, so a later append copies it, and nothing
// changes a list in place (withoutReplica copies): the residents point
// at the replicas in their lists. Each machine gets lists of its own,
// not windows of arrays for the pass: a machine kept by later passes
// would keep its pass's whole array alive. Its count of services gets
// its room too (at most one per replica).
func reserve(pm *planner.Machine, c int) {
	if c > 0 {
		pm.Replicas = make([]scheduler.Replica, 0, c)
		pm.Residents = make([]scheduler.Resident, 0, c)
		pm.ServiceCount = make(map[string]int, c)
	}
}

// schedulerMachine is the view's machine i as the scheduler sees it.
func (b *booker) schedulerMachine(i int) scheduler.Machine {
	e := b.entries[i]
	return b.p.schedulerMachine(b.p.machines[e.at], b.cls[e.cluster])
}

// bookable is the view's machine i as the scheduler sees it, with an
// empty count of services, to book replicas on.
func (b *booker) bookable(i int) *scheduler.Machine {
	sm := b.schedulerMachine(i)
	sm.ServiceCount = map[string]int{}
	return &sm
}

// sameMachine: the view's machine a (read as e), on list, is the machine
// kept was booked on, as the scheduler and the planner see it.
func sameMachine(a *scheduler.Machine, e skeletonEntry, list machineList, kept *bookedMachine) bool {
	k := kept.pm.Machine
	return list == kept.list && e.joined == kept.pm.Joined && e.created == instantOf(kept.pm.CreatedAt) &&
		a.ID == k.ID && a.Cluster == k.Cluster && a.Group == k.Group && a.Zone == k.Zone && a.CapacityType == k.CapacityType &&
		a.TEE == k.TEE && a.Allocatable == k.Allocatable && a.PricePerHour == k.PricePerHour &&
		maps.Equal(a.Labels, k.Labels) && slices.Equal(a.Runtimes, k.Runtimes) &&
		slices.EqualFunc(a.GPUs, k.GPUs, func(x, y scheduler.GPU) bool { return x.Index == y.Index && x.Type == y.Type && x.VRAMGB == y.VRAMGB })
}

// suspects marks the view's machines that may have changed since the
// last booking: listed by the feed, changed by either pass, or of a
// changed cluster. The others are, by what changed, the machines kept as
// they were booked (when on the same list), without comparing every
// field of each of 50,000 machines, nor looking each up in four sets.
// nil: every machine is compared (the feed's machines are not known, or
// the providers changed).
func (b *booker) suspects() []bool {
	if b.changed.Machines == nil || !b.sameProviders {
		return nil
	}
	suspect := reuse(&b.p.snap.Scratch.of().suspect, len(b.v.byID))
	mark := func(id string) {
		if i, ok := b.v.position(id); ok {
			suspect[i] = true
		}
	}
	for id := range b.changed.Machines {
		mark(id)
	}
	for id := range b.prev.ownMachines {
		mark(id)
	}
	for m := range b.p.mineMachines {
		mark(m.ID)
	}
	if len(b.changed.Clusters) > 0 {
		for i, e := range b.entries {
			suspect[i] = suspect[i] || b.changed.Clusters[b.cls[e.cluster].Metadata.Name]
		}
	}
	return suspect
}
