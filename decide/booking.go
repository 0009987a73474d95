package decide

import (
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/planner"
	"github.com/gantry-dev/gantry/scheduler"
)

// Booking is what a pass booked on the machines of its view: each
// machine as the scheduler sees it with the replicas running there,
// before the pass placed anything. The caller keeps a plan's Booking and
// hands it to the next pass (Snapshot.Booked), which takes every machine
// whose inputs are the same from it — its own fields, the replicas on it
// and their rules — instead of booking its replicas again: that took a
// third of a pass at 500,000 replicas, to find the few machines a change
// touched. It is a memo: a pass decides the same with it or without it
// (the decide harness decides every pass both ways and compares). It is
// never changed: a pass takes copies of its machines that copy their
// counts before they change them (scheduler.Machine.Share).
type Booking struct {
	// machines are the view's machines as booked (none the pass
	// launched), byID their positions.
	machines []bookedMachine
	byID     map[string]int32
	// replicas are the booked replicas of the pass's list (by service and
	// id), then, from main on, those of its retiring replicas (by service
	// and id too).
	replicas []bookedReplica
	main     int
}

type bookedMachine struct {
	pm   planner.Machine
	list machineList
}

type bookedReplica struct {
	// replica is the object booked: a later snapshot's same object is
	// paired with it without comparing names.
	replica  *api.Replica
	resident *scheduler.Resident
	machine  int32 // in Booking.machines
	failover bool
}

// machineList is which of the view's lists a machine is on.
type machineList uint8

const (
	listNone machineList = iota
	listJoined
	listLaunching
)

func (e *bookedReplica) service() string { return e.resident.Replica.Rules.Service }
func (e *bookedReplica) id() string      { return e.resident.Replica.ID }

// booker books the running replicas on a view's machines, from the last
// pass's Booking where it can.
type booker struct {
	p        *Pass
	v        *view
	prev     *Booking
	viewAt   map[string]int32 // position in v.byID, by machine id
	prevView []int32          // position in v.byID of each of prev's machines (-1: none)
	reused   []int32          // prev's machine each of v.byID's is taken from (-1: none)
	dirty    []bool           // of v.byID: booked afresh
	build    schedReplicas
	// the last comparison of a run's rules with those it was booked with
	freshRules, keptRules *scheduler.Rules
	sameRules             bool
}

// bookReplicas books every running replica on its machine of the view,
// and returns the Booking to hand to the next pass (nil when the pass's
// replicas are not in the store's order).
func (p *Pass) bookReplicas(v *view, lists []machineList) *Booking {
	running := append(slices.Clip(p.replicas), p.retiring...) // retiring ones run until drained
	ordered := p.index.ordered && !slices.ContainsFunc(p.replicas[p.index.sorted:], onAMachine) && slices.IsSortedFunc(p.retiring, byServiceAndID)
	prev := p.snap.Booked
	if !ordered || prev == nil {
		prev = &Booking{}
	}
	b := &booker{p: p, v: v, prev: prev, viewAt: make(map[string]int32, len(v.byID)), prevView: make([]int32, len(prev.machines)),
		reused: make([]int32, len(v.byID)), dirty: make([]bool, len(v.byID)), build: schedReplicas{p: p, zones: v.zones}}
	for j := range b.prevView {
		b.prevView[j] = -1
	}
	for i, pm := range v.byID {
		b.viewAt[pm.ID] = int32(i)
		b.reused[i] = -1
		j, ok := prev.byID[pm.ID]
		if ok {
			b.prevView[j] = int32(i)
		}
		if ok && sameMachine(pm, lists[i], &prev.machines[j]) {
			b.reused[i] = j
		} else {
			b.dirty[i] = true
		}
	}
	at, from := b.match(running)
	next := b.book(running, at, from, lists)
	if !ordered {
		return nil
	}
	return next
}

// onAMachine: a replica the pass made that is already on a machine.
func onAMachine(r *api.Replica) bool { return r.Machine != "" }

// match finds, for each running replica, the machine of the view it is
// booked on (-1: none) and its entry in the last booking (-1: none),
// marking dirty every machine that gains, loses or changes a replica.
func (b *booker) match(running []*api.Replica) (at, from []int32) {
	at, from = make([]int32, len(running)), make([]int32, len(running))
	for k := range from {
		from[k] = -1
	}
	mainLen := len(b.p.replicas)
	b.merge(running[:b.p.index.sorted], b.prev.replicas[:b.prev.main], 0, from)
	b.merge(running[mainLen:], b.prev.replicas[b.prev.main:], b.prev.main, from[mainLen:])
	var svc *api.Service
	for k, r := range running {
		at[k] = -1
		if svc == nil || svc.Metadata.Name != r.Service { // replicas come by service
			svc = b.p.services[r.Service]
		}
		if r.Machine == "" || svc == nil {
			b.unbook(from[k])
			continue
		}
		if e := b.entry(from[k]); e != nil && b.prev.machines[e.machine].pm.ID == r.Machine && b.sameBooking(r, svc, e) {
			at[k] = b.prevView[e.machine]
			continue
		}
		b.unbook(from[k])
		if i, ok := b.viewAt[r.Machine]; ok {
			at[k] = i
			b.dirty[i] = true
		}
	}
	return at, from
}

// merge pairs replicas with the last booking's entries of the same
// service and id (both lists are by service and id); base is where
// entries begins in the last booking. Entries left without a replica
// unbook their machines.
func (b *booker) merge(replicas []*api.Replica, entries []bookedReplica, base int, from []int32) {
	j := 0
	for k, r := range replicas {
		for j < len(entries) && entries[j].replica != r && compareEntry(r, &entries[j]) > 0 {
			b.unbook(int32(base + j))
			j++
		}
		if j < len(entries) && (entries[j].replica == r || compareEntry(r, &entries[j]) == 0) {
			from[k] = int32(base + j)
			j++
		}
	}
	for ; j < len(entries); j++ {
		b.unbook(int32(base + j))
	}
}

func compareEntry(r *api.Replica, e *bookedReplica) int {
	if c := strings.Compare(r.Service, e.service()); c != 0 {
		return c
	}
	return strings.Compare(r.ID, e.id())
}

func (b *booker) entry(i int32) *bookedReplica {
	if i < 0 {
		return nil
	}
	return &b.prev.replicas[i]
}

// unbook marks dirty the machine a last booking's entry was on.
func (b *booker) unbook(i int32) {
	if e := b.entry(i); e != nil {
		if at := b.prevView[e.machine]; at >= 0 {
			b.dirty[at] = true
		}
	}
}

// sameBooking: r books on its machine what e booked there.
func (b *booker) sameBooking(r *api.Replica, svc *api.Service, e *bookedReplica) bool {
	booked := e.resident.Replica
	req := r.Requests
	req.GPUs = 0
	if r.ID != booked.ID || r.Index != booked.Index || req != booked.Requests || !slices.Equal(r.GPUIndexes, e.resident.GPUs) || (svc.Spec.Failover != nil) != e.failover {
		return false
	}
	fresh := b.build.rulesOf(r, svc)
	if fresh != b.freshRules || booked.Rules != b.keptRules {
		b.freshRules, b.keptRules = fresh, booked.Rules
		b.sameRules = reflect.DeepEqual(*fresh, *booked.Rules)
	}
	return b.sameRules
}

// book books the replicas of the dirty machines afresh, takes the others
// from the last booking, and returns the booking of this pass.
func (b *booker) book(running []*api.Replica, at, from []int32, lists []machineList) *Booking {
	v := b.v
	b.reserve(at)
	next := &Booking{machines: make([]bookedMachine, 0, len(v.byID)), byID: make(map[string]int32, len(v.byID)),
		replicas: make([]bookedReplica, 0, len(running))}
	nextAt := make([]int32, len(v.byID)) // position in next.machines of each of v.byID's
	for i, pm := range v.byID {
		nextAt[i] = -1
		if !b.dirty[i] {
			kept := &b.prev.machines[b.reused[i]]
			pm.Machine, pm.Replicas, pm.DoNotDisrupt = kept.pm.Machine, slices.Clip(kept.pm.Replicas), kept.pm.DoNotDisrupt
		}
		if !isPlaceholder(b.p.machineByID[pm.ID]) {
			nextAt[i] = int32(len(next.machines))
			next.byID[pm.ID] = nextAt[i]
			next.machines = append(next.machines, bookedMachine{list: lists[i]})
		}
	}
	mainLen := len(b.p.replicas)
	var svc *api.Service
	for k, r := range running {
		if k == mainLen {
			next.main = len(next.replicas)
		}
		i := at[k]
		if i < 0 {
			continue
		}
		if svc == nil || svc.Metadata.Name != r.Service {
			svc = b.p.services[r.Service]
		}
		if !b.dirty[i] {
			e := b.entry(from[k])
			next.replicas = append(next.replicas, bookedReplica{replica: r, resident: e.resident, machine: nextAt[i], failover: e.failover})
			continue
		}
		pm := v.byID[i]
		sr := b.build.of(r, svc)
		if svc.Spec.Failover != nil {
			pm.DoNotDisrupt = true // a failover member's data lives on its machine
		}
		scheduler.Assign(pm.Machine, sr, r.GPUIndexes)
		pm.Replicas = append(pm.Replicas, sr)
		booked := &pm.Replicas[len(pm.Replicas)-1] // in its list: never moved, never changed
		pm.Residents = append(pm.Residents, scheduler.Resident{Replica: booked, Priority: sr.Priority, GPUs: r.GPUIndexes})
		next.replicas = append(next.replicas, bookedReplica{replica: r, resident: &pm.Residents[len(pm.Residents)-1], machine: nextAt[i], failover: svc.Spec.Failover != nil})
	}
	if mainLen >= len(running) {
		next.main = len(next.replicas)
	}
	// The booking keeps each machine as booked; the pass works on copies.
	for i, pm := range v.byID {
		if nextAt[i] >= 0 {
			next.machines[nextAt[i]].pm = *pm
		}
		pm.Machine = pm.Machine.Share()
	}
	return next
}

// reserve gives each dirty machine's replica and resident lists their
// room: appended one by one, the lists of a 500,000-replica fleet
// allocated over a gigabyte per pass. Each list's capacity is its count,
// so a later append copies it, and nothing changes a list in place
// (withoutReplica copies): the residents point at the replicas in their
// lists. Each machine gets lists of its own, not windows of arrays for
// the pass: a machine kept by later passes would keep its pass's whole
// array alive. Each machine's count of services gets its room too (at
// most one per replica).
func (b *booker) reserve(at []int32) {
	counts := make([]int, len(b.v.byID))
	for _, i := range at {
		if i >= 0 && b.dirty[i] {
			counts[i]++
		}
	}
	for i, pm := range b.v.byID {
		if c := counts[i]; c > 0 && b.dirty[i] {
			pm.Replicas = make([]scheduler.Replica, 0, c)
			pm.Residents = make([]scheduler.Resident, 0, c)
			pm.ServiceCount = make(map[string]int, c)
		}
	}
}

// sameMachine: the view's machine pm, on list, is the machine kept was
// booked on, as the scheduler and the planner see it.
func sameMachine(pm *planner.Machine, list machineList, kept *bookedMachine) bool {
	a, k := pm.Machine, kept.pm.Machine
	return list == kept.list && pm.Joined == kept.pm.Joined && pm.CreatedAt.Equal(kept.pm.CreatedAt) &&
		a.ID == k.ID && a.Cluster == k.Cluster && a.Group == k.Group && a.Zone == k.Zone && a.CapacityType == k.CapacityType &&
		a.TEE == k.TEE && a.Allocatable == k.Allocatable && a.PricePerHour == k.PricePerHour &&
		maps.Equal(a.Labels, k.Labels) && slices.Equal(a.Runtimes, k.Runtimes) &&
		slices.EqualFunc(a.GPUs, k.GPUs, func(x, y scheduler.GPU) bool { return x.Index == y.Index && x.Type == y.Type && x.VRAMGB == y.VRAMGB })
}
