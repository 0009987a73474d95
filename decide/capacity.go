package decide

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/planner"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/replica"
	"github.com/gantry-dev/gantry/runtime"
	"github.com/gantry-dev/gantry/scheduler"
	"github.com/gantry-dev/gantry/spec"
)

// planCapacity sizes every group through the planner: warm-pool machines
// start before anything is launched, launches wait out their group's
// backoff, idle machines are stopped or drained, and every replica that
// still waits is told why.
// A pass whose scheduling was reused (a quietCapacity) reuses the
// planner's plan too, when the planner would read the same.
func (p *Pass) planCapacity(v *view, unplaced []scheduler.Replica, schedReasons whyWaiting, reused *quietCapacity) {
	counted := p.countedNow()
	groups, subnets := p.plannerGroups(v, counted), p.subnetBudgets(v, counted)
	candidateAt := p.candidateAt // walkView's
	var plan planner.Plan
	var looks bool // whether consolidation would look beside plan (planner.ComputeAndLooks)
	waits, due := p.consolidationWaits()
	if reused != nil && !reused.planExpired && leavesCapacity(p.plan) && reused.samePlannerInputs(groups, subnets) { // ended moves aside: see onlyEndedMoves
		plan, looks = reused.plan, reused.looks
		p.capacity, p.capacityReused = reused, true
	} else {
		scratch := p.snap.Scratch.of()
		machines := append(room(&scratch.planned, len(v.byID)), v.byID...)
		var sums *planner.MachineSums
		var rooms []scheduler.Room
		var ids []string
		if v.sorted < len(machines) { // the pass launched machines before it built the view
			slices.SortFunc(machines, func(a, b *planner.Machine) int { return strings.Compare(a.ID, b.ID) })
		} else {
			if waits {
				sums = p.skeleton.machineSums()
			} else if p.snap.Scratch != nil {
				// The look reads again only the machines changed since
				// the last, which a kept scratch remembers (the view's
				// ids are its machines').
				p.noteMachinesChanged(v, &scratch.planner)
				ids = v.ids
			}
			// The planner reads the rooms to place, and to look for
			// machines to remove; a pass booking afresh reads each
			// machine (the harness compares the two).
			if (len(unplaced) > 0 || !waits) && p.snap.Booked != nil && v.booked {
				rooms = v.plannerRooms(&scratch.rooms)
			}
		}
		plan, looks = planner.ComputeAndLooks(p.cfg.Planner, planner.Input{Groups: groups, Machines: machines, MachinesByID: true, Pending: unplaced,
			Unavailable: p.mem.Unavailable, Now: p.now, Subnets: subnets, SkipConsolidation: waits, Scratch: &scratch.planner, Sums: sums,
			Rooms: rooms, MachineIDs: ids})
		if !waits && len(plan.Remove) > 0 {
			// A look that removes goes on at the next pass: a fleet
			// shrinking by max-removals a look is not held to one look
			// an interval (7 days of 10,000 machines cost 3.8% more).
			p.plan.ConsolidatedAt = time.Time{}
		}
		capacityWake := candidateAt
		if waits && (capacityWake.IsZero() || due.Before(capacityWake)) {
			capacityWake = due // a plan that left consolidation out is not taken by a pass that looks
		}
		p.capacity = p.quietCapacityOf(unplaced, schedReasons, plan, groups, subnets, capacityWake)
		p.capacity.looks = looks
	}
	// What this pass changed may make a machine removable: it wakes for
	// the look it left out, unless every cluster grows.
	if waits && looks {
		p.plan.Wake.at(due)
	}
	if !candidateAt.IsZero() {
		p.plan.Wake.at(candidateAt)
	}
	for key, n := range plan.Desired {
		p.mem.Desired[key] = n
	}
	blocked := p.addMachines(plan, unplaced)
	p.removeMachines(plan)
	p.setPendingReasons(plan, v, unplaced, schedReasons, blocked)
	placements := p.plan.Capacity.Placements
	p.plan.Capacity = plan
	p.plan.Capacity.Placements = append(placements, plan.Placements...)
	sort.Slice(p.plan.Capacity.Placements, func(i, j int) bool {
		return p.plan.Capacity.Placements[i].Replica < p.plan.Capacity.Placements[j].Replica
	})
}

// noteMachinesChanged tells the planner's scratch which of the view's
// machines the pass changed so far (booked afresh, or placed on or taken
// from), for its next look; all of them when the view is not the last
// pass's patched (its entries were all written). A pass notes them again
// as it ends, for what it changed after its look (restored as booked by
// the next pass).
func (p *Pass) noteMachinesChanged(v *view, s *planner.Scratch) {
	if !v.patched {
		s.ForgetMachines()
		return
	}
	for _, i := range v.rewritten {
		s.NoteMachineChanged(v.ids[i])
	}
	for _, i := range v.touched {
		s.NoteMachineChanged(v.ids[i])
	}
}

// consolidationWaits reports whether the pass leaves consolidation to a
// later one, and when that is due: the last look found nothing to
// remove less than ConsolidateInterval ago (one that removed leaves no
// time, and the next pass looks). Otherwise the pass looks, and its plan
// says when.
func (p *Pass) consolidationWaits() (bool, time.Time) {
	last, every := p.snap.ConsolidatedAt, p.cfg.ConsolidateInterval
	if every > 0 && !last.IsZero() && !p.now.Before(last) { // a clock that went back looks now
		if due := last.Add(every); p.now.Before(due) {
			return true, due
		}
	}
	p.plan.ConsolidatedAt = p.now
	return false, time.Time{}
}

// addMachines starts stopped warm-pool machines first, then launches; it
// returns, by planner key, why a machine is not launched now. unplaced
// are the replicas the plan places.
func (p *Pass) addMachines(plan planner.Plan, unplaced []scheduler.Replica) map[string]string {
	var stopped map[string][]*api.Machine
	if slices.ContainsFunc(plan.Add, func(nm planner.NewMachine) bool { return len(nm.Replicas) > 0 }) { // else no walk of every machine
		stopped = map[string][]*api.Machine{}
		for _, m := range p.machines {
			if m.FleetState == api.FleetStopped {
				key := planner.Key(m.Cluster, m.Group)
				stopped[key] = append(stopped[key], m)
			}
		}
	}
	var replacing map[string]string // the machine each replacement replaces, by its key
	for _, r := range plan.Remove {
		if r.ReplacedBy != "" {
			if replacing == nil {
				replacing = map[string]string{}
			}
			replacing[r.ReplacedBy] = r.MachineID
		}
	}
	holds := p.holdsOneOf(stopped, unplaced)
	blocked := map[string]string{}
	for _, nm := range plan.Add {
		key := planner.Key(nm.Cluster, nm.Group)
		if m := takeStopped(stopped, key, nm, replacing[nm.Key] != "", holds); m != nil {
			p.plan.Starts = append(p.plan.Starts, MachineStep{Machine: m.ID, Reason: "scale-up: " + nm.Reason})
			// Idle from its start: the time it was idle before it was
			// stopped would stop it again at once, before what it was
			// started for comes to it.
			owned(&p.mem.IdleSince, &p.owns.idle)[m.ID] = p.now
			continue
		}
		if why, ok := p.launchBlocked(nm.Cluster, nm.Group); ok {
			blocked[nm.Key] = why
			continue
		}
		p.launch(Launch{Key: nm.Key, Cluster: nm.Cluster, Group: nm.Group, InstanceType: nm.InstanceType, Zone: nm.Zone,
			CapacityType: nm.CapacityType, PricePerHour: nm.PricePerHour, Reason: nm.Reason, Replaces: replacing[nm.Key]}, p.templateOf(nm.Cluster, nm.Group))
	}
	return blocked
}

// takeStopped is the stopped machine of the group that serves nm, taken
// from the list (nil: launch). A machine for pending replicas is served
// by any that holds one of them (holds): the warm pool is there to start
// fast, and what it cannot hold waits for the next plan; one that holds
// none of them would run idle while they wait for a launch all the same.
// A replacement is only served by one of its instance type, zone and
// price or less: it is planned to save, and a dearer or other machine
// started in its place saves nothing, so consolidation would replace it
// again.
func takeStopped(stopped map[string][]*api.Machine, key string, nm planner.NewMachine, replacement bool,
	holds func(*api.Machine, []string) bool) *api.Machine {
	if len(nm.Replicas) == 0 {
		return nil
	}
	pool := stopped[key]
	var at int
	if replacement {
		at = slices.IndexFunc(pool, func(m *api.Machine) bool {
			return m.InstanceType == nm.InstanceType && (nm.Zone == "" || m.Zone == nm.Zone) && m.PricePerHour <= nm.PricePerHour
		})
	} else {
		at = slices.IndexFunc(pool, func(m *api.Machine) bool { return holds(m, nm.Replicas) })
	}
	if at < 0 || at >= len(pool) {
		return nil
	}
	m := pool[at]
	stopped[key] = slices.Delete(pool, at, at+1) // the pass's own list
	return m
}

// holdsOneOf says whether a stopped machine, empty, could take one of
// the replicas of ids, as the scheduler would place it there (its
// cluster, group, runtime, labels, GPUs and room), for stopped machines
// and replicas of unplaced.
func (p *Pass) holdsOneOf(stopped map[string][]*api.Machine, unplaced []scheduler.Replica) func(*api.Machine, []string) bool {
	if len(stopped) == 0 {
		return func(*api.Machine, []string) bool { return false }
	}
	byID := make(map[string]*scheduler.Replica, len(unplaced))
	for i := range unplaced {
		byID[unplaced[i].ID] = &unplaced[i]
	}
	return func(m *api.Machine, ids []string) bool {
		cl := p.snap.Clusters[m.Cluster]
		if cl == nil {
			return false
		}
		sm := p.schedulerMachine(m, cl)
		return slices.ContainsFunc(ids, func(id string) bool {
			r := byID[id]
			return r != nil && scheduler.Fits(&sm, *r) == ""
		})
	}
}

func (p *Pass) templateOf(cluster, group string) string {
	if cl := p.snap.Clusters[cluster]; cl != nil {
		return spec.TemplateHash(cl, group)
	}
	return ""
}

// removeMachines stops idle machines into the warm pool and drains the
// ones the planner removes; a machine replaced by a cheaper one goes once
// its successor took its replicas.
func (p *Pass) removeMachines(plan planner.Plan) {
	for _, r := range plan.Remove {
		m := p.machine(r.MachineID)
		switch {
		case m == nil:
		case r.Stop:
			p.plan.Stops = append(p.plan.Stops, MachineStep{Machine: m.ID, Reason: r.Reason})
		case r.ReplacedBy == "":
			p.drain(m, r.Reason)
		}
	}
}

// setPendingReasons explains every replica that still waits: the
// planner's reason, else what the machine the planner placed it on waits
// for, else the scheduler's reason (schedReasons, which names replicas
// among unplaced). The planner's lists and unplaced are by id, so they
// are merged, not collected into a map of every waiting replica (a
// fleet's launch has tens of thousands waiting, each told its reason
// every pass).
func (p *Pass) setPendingReasons(plan planner.Plan, v *view, unplaced []scheduler.Replica, schedReasons whyWaiting, blocked map[string]string) {
	// One reason a machine, said the same to every replica waiting for it.
	waitFor := make(map[string]string, len(plan.Add))
	for _, nm := range plan.Add {
		why := fmt.Sprintf("waiting for a new %s machine in %s/%s", nm.InstanceType, nm.Group, orNone(nm.Zone))
		if blockedBy, ok := blocked[nm.Key]; ok {
			why += ": " + blockedBy
		}
		waitFor[nm.Key] = why
	}
	lastMachine, lastWhy := "", ""
	placedWhy := func(pl planner.ReplicaPlacement) string {
		if pl.Machine == lastMachine && lastMachine != "" { // replicas by id fill a machine in runs
			return lastWhy
		}
		why, known := waitFor[pl.Machine]
		if !known {
			if m := v.machine(pl.Machine); m != nil && !m.Joined {
				why = p.waitingFor(pl.Machine)
			}
			waitFor[pl.Machine] = why // "": a joined machine, no reason to wait
		}
		lastMachine, lastWhy = pl.Machine, why
		return why
	}
	if len(p.plan.Pending) == 0 {
		p.plan.Pending = make(map[string]string, max(len(plan.Placements), len(unplaced))+len(plan.Pending))
	}
	at := p.cursor()
	placed, pending, waiting := plan.Placements, plan.Pending, unplaced
	for len(placed)+len(pending)+len(waiting) > 0 {
		id := firstID(placed, pending, waiting)
		why, known := "", false
		for ; len(placed) > 0 && placed[0].Replica == id; placed = placed[1:] {
			if w := placedWhy(placed[0]); w != "" {
				why, known = w, true
			}
		}
		for ; len(pending) > 0 && pending[0].Replica == id; pending = pending[1:] {
			why, known = pending[0].Reason, true
		}
		for ; len(waiting) > 0 && waiting[0].ID == id; waiting = waiting[1:] {
		}
		if !known {
			why, known = schedReasons.of(id)
		}
		if known {
			p.tellPendingOf(at, id, why)
		}
	}
}

// firstID is the least id at the head of the lists (one at least is not
// empty).
func firstID(placed []planner.ReplicaPlacement, pending []planner.PendingReplica, waiting []scheduler.Replica) string {
	id, some := "", false
	least := func(candidate string) {
		if !some || candidate < id {
			id, some = candidate, true
		}
	}
	if len(placed) > 0 {
		least(placed[0].Replica)
	}
	if len(pending) > 0 {
		least(pending[0].Replica)
	}
	if len(waiting) > 0 {
		least(waiting[0].ID)
	}
	return id
}

// tellPendingOf tells the replica of id, if it still waits for a
// machine, why (and keeps its reason when it changed); one that waits
// for a machine still on its way goes on naming it (stillAwaited).
func (p *Pass) tellPendingOf(at *cursor, id, why string) {
	i, ok := at.find(id)
	if !ok || p.replicas[i].Machine != "" {
		return
	}
	r := p.replicas[i]
	if p.stillAwaited(r, why) {
		why = r.Reason
	}
	p.tellPending(r, why)
	if r.State != api.ReplicaPending || r.Reason != why { // unchanged: no copy to keep
		replica.SetPending(p.ownAt(i), why, p.now)
	}
}

// tellPending says why a replica waits (Plan.Pending); the act step is to
// write it when the replica, as the pass holds it before, says otherwise
// or is one the pass changed or made (Plan.PendingChanged).
func (p *Pass) tellPending(r *api.Replica, why string) {
	if p.mine[r] || r.Machine == "" && r.Pod == "" && (r.State != api.ReplicaPending || r.Reason != why) {
		p.plan.PendingChanged = append(p.plan.PendingChanged, r.ID)
	}
	p.plan.Pending[r.ID] = why
}

func (p *Pass) waitingFor(machine string) string {
	m := p.machine(machine)
	if m != nil && isPlaceholder(m) {
		return fmt.Sprintf("waiting for a new %s machine in %s/%s", m.InstanceType, m.Group, orNone(m.Zone))
	}
	return joinWait(machine)
}

const joinWaitPrefix, joinWaitSuffix = "waiting for machine ", " to join"

// joinWait is the reason of a replica that waits for a machine on its
// way to join.
func joinWait(machine string) string { return joinWaitPrefix + machine + joinWaitSuffix }

// stillAwaited reports whether a waiting replica, told to wait for one
// machine on its way, already waits for another that is still on its
// way: it keeps its reason. Which of the machines on their way takes it
// is the scheduler's choice once they join; the planner's pick moves from
// pass to pass as replicas come and go, and a new reason each time was a
// write and an event for every waiting replica in every pass of a
// fleet's launch. On its way is launching as the pass holds the machine:
// not joined, its join not failed, not terminating (a machine the pass
// itself ends is no longer awaited).
func (p *Pass) stillAwaited(r *api.Replica, why string) bool {
	if r.State != api.ReplicaPending || r.Reason == why {
		return false
	}
	if _, ok := awaitedMachine(why); !ok {
		return false
	}
	was, ok := awaitedMachine(r.Reason)
	if !ok || strings.HasPrefix(was, placeholderPrefix) {
		return false
	}
	m := p.machine(was)
	return m != nil && m.Launching()
}

// awaitedMachine is the machine a joinWait reason names.
func awaitedMachine(why string) (string, bool) {
	rest, ok := strings.CutPrefix(why, joinWaitPrefix)
	if !ok {
		return "", false
	}
	return strings.CutSuffix(rest, joinWaitSuffix)
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// subnetBudgets: per cluster, the /24s of its containerCidr no live
// machine holds.
func (p *Pass) subnetBudgets(v *view, counted *fleetCensus) map[string]planner.Subnets {
	out := map[string]planner.Subnets{}
	for name := range v.clusters {
		cl := p.snap.Clusters[name]
		prefix, err := netip.ParsePrefix(cl.Spec.ContainerCIDR)
		if err != nil || prefix.Bits() > 24 {
			continue
		}
		out[name] = planner.Subnets{CIDR: cl.Spec.ContainerCIDR, Free: (1 << (24 - prefix.Bits())) - counted.held[name]}
	}
	return out
}

// plannerGroups describes every capacity group of the target's clusters
// to the planner, with the instance types it may launch.
func (p *Pass) plannerGroups(v *view, counted *fleetCensus) []*planner.Group {
	var out []*planner.Group
	names := make([]string, 0, len(v.clusters))
	for name := range v.clusters {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		cl, cp := p.snap.Clusters[name], p.snap.Catalogs[name]
		if cp.Err != "" {
			continue
		}
		prov := p.snap.Providers[cl.Spec.Provider.Name]
		for _, g := range cl.Spec.CapacityGroups {
			types, err := provisioner.GroupTypes(cp.Catalog, g)
			if err != nil {
				continue
			}
			t := counted.groups[groupKey{name, g.GroupID}]
			if t == nil {
				t = &groupCensus{}
			}
			out = append(out, &planner.Group{Cluster: name, ID: g.GroupID, MinSize: g.MinSize, MaxSize: g.MaxSize, WarmPool: g.WarmPool,
				CapacityType: g.CapacityType, Zones: g.Zones, Labels: g.Labels, Runtimes: prov.Runtimes,
				TEE:      t.tee || slices.ContainsFunc(prov.Runtimes, runtime.IsTEE),
				Reserved: spec.Reserved(cl.Spec.SystemReserved), Types: types, Live: t.counted,
				WarmStopped: g.WarmPoolState == api.WarmStopped && prov.CanStop, Stopped: t.stopped})
		}
	}
	return out
}
