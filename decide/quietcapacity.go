package decide

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/planner"
	"github.com/gantry-dev/gantry/replica"
	"github.com/gantry-dev/gantry/scheduler"
)

// quietCapacity is what scheduling and the planner found in a pass that
// changed nothing (or only ended moves: leavesCapacity), with what they
// read that the booking does not show: while replicas wait for machines
// still booting, pass after pass placed them again to the same end (two
// thirds of such a pass). The next pass takes it instead while nothing
// they read changed: no machine, service or cluster in the store, no
// revision in the memory, the same idle machines since the same times,
// no replica but one that runs on, as booked, on the machine it was on;
// nothing the pass itself did before but end moves (onlyEndedMoves); the
// same groups (catalogs and prices included), subnets, unavailable
// offerings, providers and settings; and no deadline the planner
// compares the time with has come (once one has, the scheduling alone is
// taken, and the planner plans afresh). The decision harness decides
// every pass afresh too.
type quietCapacity struct {
	at, wake time.Time
	cfg      Config
	unplaced []scheduler.Replica
	reasons  whyWaiting
	// plan is the planner's plan, only read once made; planExpired: its
	// deadline came, and only the scheduling is taken.
	plan        planner.Plan
	planExpired bool
	// looks: consolidation would look beside plan, for its machines
	// (planner.ComputeAndLooks); a pass that takes the plan has the same.
	looks       bool
	groups      []*planner.Group
	subnets     map[string]planner.Subnets
	unavailable map[string]time.Time
	// idle is since when each machine was empty, as the planner read it
	// (after the pass tracked it).
	idle map[string]time.Time
}

// lastQuietCapacity is the last pass's quietCapacity if no replica
// changed since but in its state alone (nil: none). It reads the last
// booking, so it runs before the pass books (which consumes it).
func (p *Pass) lastQuietCapacity(clusters []string) *quietCapacity {
	prev, changed := p.snap.Booked, p.snap.Changed
	if prev == nil || prev.capacity == nil || changed == nil || !p.index.ordered {
		return nil
	}
	build := schedReplicas{p: p, zones: p.zonesOf(clusters)}
	for id, was := range changed.Replicas {
		if !p.runsOnAsBooked(id, was, prev, &build) {
			return nil
		}
	}
	return prev.capacity
}

// reusable is q, when this pass may take it now, having booked its
// machines (nil: it schedules and plans afresh).
func (p *Pass) reusable(q *quietCapacity, v *view) *quietCapacity {
	changed := p.snap.Changed
	if q == nil || q.cfg != p.cfg || p.now.Before(q.at) {
		return nil
	}
	if !p.machinesAsBooked(v) || len(changed.Services)+len(changed.Clusters) > 0 || revisionChanged(changed.Memory) ||
		!p.onlyEndedMoves(v) || p.owns.revisions ||
		!maps.EqualFunc(q.idle, p.mem.IdleSince, time.Time.Equal) || !maps.EqualFunc(q.unavailable, p.mem.Unavailable, time.Time.Equal) ||
		!reflect.DeepEqual(p.snap.Booked.providers, p.snap.Providers) {
		return nil
	}
	if !q.wake.IsZero() && !p.now.Before(q.wake) {
		// The planner's deadline came (a consolidation look due, a machine
		// a candidate to remove): it plans afresh, but scheduling, which
		// compares no time with it, holds (at 900 machines a fifth of the
		// passes, each scheduling the replicas that wait again).
		expired := *q
		expired.planExpired = true
		return &expired
	}
	return q
}

// machinesAsBooked: no machine changed since the last pass, or each
// that did changed nothing scheduling or the planner read. One in the
// view is as the last booking had it (a describe's answer for a machine
// on its way, say), and the view lists the same machines. One outside
// the view (a terminating machine gone) stayed out of it; it may not be
// draining, whose replicas scheduling moves (one draining since left the
// view, and one whose drain ended had its replicas moved or none). The
// planner's counts of each group are compared apart (samePlannerInputs).
// Machines not known to be unchanged (a feed without them) count as
// changed.
func (p *Pass) machinesAsBooked(v *view) bool {
	changed := p.snap.Changed.Machines
	switch {
	case changed == nil:
		return false
	case len(changed) == 0:
		return true
	case !v.asBooked:
		return false
	}
	for id := range changed {
		if _, in := v.position(id); in {
			continue
		}
		if m := p.machine(id); m != nil && m.FleetState == api.FleetDraining {
			return false
		}
	}
	return true
}

// onlyEndedMoves: the pass did nothing so far but end moves
// (finishHandovers): each replica it changed is the snapshot's with its
// move ended, and booked in the view on the machine it moved to. Neither
// scheduling nor the planner reads the old copy (see runsOnAsBooked);
// a copy moved onto a machine that drains since is another matter: once
// its move ends, it needs a move of its own. At 900 machines one pass in
// thirteen did only that, as a consolidation's moves ended one by one.
func (p *Pass) onlyEndedMoves(v *view) bool {
	plan := p.plan
	plan.EndMoves = nil
	if plan.Acts() || len(p.deleting)+len(p.mineMachines) > 0 || len(p.mine) != len(p.endedMoves) {
		return false
	}
	for _, was := range p.endedMoves {
		r := p.replica(was.ID)
		if r == nil || !p.mine[r] || !bookedIn(v, r) {
			return false
		}
		ended := *was
		replica.EndMove(&ended)
		if !reflect.DeepEqual(&ended, r) {
			return false
		}
	}
	return true
}

// bookedIn: the view books the replica on its machine.
func bookedIn(v *view, r *api.Replica) bool {
	pm := v.machine(r.Machine)
	return pm != nil && slices.ContainsFunc(pm.Replicas, func(b scheduler.Replica) bool { return b.ID == r.ID })
}

// revisionChanged: a revision in the memory changed (the rules of the
// replicas of it), which scheduling reads. Of the other memory sections
// the planner reads, since when machines are idle and the offerings
// unavailable are compared as they are (the pass before the next wrote
// the idle entries it planned with); the others (deployments, launch
// outcomes, backoffs, the counts desired, …) only the steps around them
// read.
func revisionChanged(keys map[string]bool) bool {
	for key := range keys {
		if section, _, _ := strings.Cut(key, "/"); section == "revision" {
			return true
		}
	}
	return false
}

// runsOnAsBooked: the changed replica runs on the machine it was booked
// on, and would be booked there as it was (the same rules, requests and
// devices): a change of its state alone, which neither scheduling nor
// the planner reads. The machine a moved replica's old copy still runs
// on is one of them: a move is off a draining machine, which neither
// sees, and the booking counts a replica on its machine alone (a copy
// moved onto a machine draining since is not booked: found nowhere).
func (p *Pass) runsOnAsBooked(id string, was ReplicaWas, prev *Booking, build *schedReplicas) bool {
	r := p.replica(id)
	if r == nil || was.Machine == "" || r.Machine != was.Machine || r.RetiringSince != nil || r.State != api.ReplicaRunning {
		return false
	}
	svc := p.services[r.Service]
	j, found := slices.BinarySearch(prev.ids, r.Machine)
	if svc == nil || !found {
		return false
	}
	booked := prev.machines[j]
	k := slices.IndexFunc(booked.replicas, func(b *api.Replica) bool { return b.ID == id })
	i := slices.IndexFunc(booked.pm.Replicas, func(b scheduler.Replica) bool { return b.ID == id })
	if k < 0 || i < 0 {
		return false
	}
	b := booked.replicas[k]
	return b.RetiringSince == nil && slices.Equal(b.GPUIndexes, r.GPUIndexes) && reflect.DeepEqual(booked.pm.Replicas[i], build.of(r, svc))
}

// samePlannerInputs: the planner would read what it read when it made
// q's plan (the booking and the waiting replicas being the same).
func (q *quietCapacity) samePlannerInputs(groups []*planner.Group, subnets map[string]planner.Subnets) bool {
	return reflect.DeepEqual(q.groups, groups) && maps.Equal(q.subnets, subnets)
}

// leavesCapacity: the pass's scheduling and plan hold for the next pass,
// which sees its writes: it acted on nothing, or only stopped the old
// copies of moved replicas (EndMoves), whose moves it saw done before it
// scheduled, and which neither scheduling nor the planner reads (see
// runsOnAsBooked). Consolidation's moves end one by one, each a pass.
func leavesCapacity(plan Plan) bool {
	plan.EndMoves = nil
	return !plan.Acts()
}

// quietCapacityOf is what a pass that changes nothing leaves the next:
// its scheduling's and planner's findings, with the planner's inputs
// copied (the catalogs' prices may change in place), valid until the
// planner's next deadline: a machine becoming a candidate to remove, an
// offering available again.
func (p *Pass) quietCapacityOf(unplaced []scheduler.Replica, reasons whyWaiting, plan planner.Plan,
	groups []*planner.Group, subnets map[string]planner.Subnets, candidateAt time.Time) *quietCapacity {
	wake := candidateAt
	for _, until := range p.mem.Unavailable {
		if until.After(p.now) && (wake.IsZero() || until.Before(wake)) {
			wake = until
		}
	}
	return &quietCapacity{at: p.now, wake: wake, cfg: p.cfg, unplaced: unplaced, reasons: reasons, plan: plan,
		groups: cloneGroups(groups), subnets: subnets, unavailable: maps.Clone(p.mem.Unavailable), idle: maps.Clone(p.mem.IdleSince)}
}

// cloneGroups copies groups down to their offerings.
func cloneGroups(groups []*planner.Group) []*planner.Group {
	out := make([]*planner.Group, len(groups))
	for i, g := range groups {
		c := *g
		c.Zones, c.Labels, c.Runtimes = slices.Clone(g.Zones), maps.Clone(g.Labels), slices.Clone(g.Runtimes)
		c.Types = slices.Clone(g.Types)
		for k := range c.Types {
			c.Types[k].GPUs, c.Types[k].Offerings = slices.Clone(c.Types[k].GPUs), slices.Clone(c.Types[k].Offerings)
		}
		out[i] = &c
	}
	return out
}
