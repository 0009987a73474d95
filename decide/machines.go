package decide

import (
	"fmt"
	"iter"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/failover"
	"github.com/gantry-dev/gantry/fleet"
	"github.com/gantry-dev/gantry/planner"
	"github.com/gantry-dev/gantry/provider/registry"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/scheduler"
	"github.com/gantry-dev/gantry/spec"
)

// machines is the target of clusters whose replicas run on machines Gantry
// provisions, through agents.
type machines struct{}

// Decide runs the machine target's steps, in order: each sees what the
// ones before decided.
func (machines) Decide(p *Pass, clusters []string) {
	last := p.lastQuietCapacity(clusters)
	p.recoverInstances()
	p.detectLost()
	p.finishDrains()
	p.finishReplacements()
	p.rollouts(clusters)
	p.followLaunches()
	v := p.buildView(clusters)
	p.walkView(v)
	reused := p.reusable(last, v)
	var unplaced []scheduler.Replica
	var reasons whyWaiting
	if reused != nil {
		unplaced, reasons = reused.unplaced, reused.reasons
		p.schedulingReused = reused.planExpired
	} else {
		unplaced, reasons = p.schedule(v)
	}
	p.repairSpread(v)
	p.planCapacity(v, unplaced, reasons, reused)
	p.drainOrphanedGroups()
	p.followTerminations()
	p.listProviders()
}

// recoverInstances compares each fresh inventory with the store: a launch
// intent whose instance exists gets it (the call's answer was lost), a
// machine whose instance is gone is terminated, and a tagged instance no
// live machine owns is terminated once older than OrphanGrace. Machines
// recorded after the list began are not judged by it, nor is an instance
// Gantry learned of after the list began (its launch answered while the
// list ran): an observation older than what it would judge says nothing.
func (p *Pass) recoverInstances() {
	keys := make([]string, 0, len(p.snap.Inventories))
	for k := range p.snap.Inventories {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		inv := p.snap.Inventories[key]
		byMachine := make(map[string]int, len(inv.Instances)) // the last instance tagged with each
		for i, inst := range inv.Instances {
			byMachine[inst.Tags[provisioner.TagMachine]] = i
		}
		// owned: the instance's machine is live (found in the walk, not
		// looked up again for each instance).
		owned := make([]bool, len(inv.Instances))
		for _, m := range p.machines {
			if registry.KeyOf(m) != key || !m.Live() || !m.CreatedAt.Before(inv.At) {
				continue
			}
			i, found := byMachine[m.ID]
			if found {
				owned[i] = true
			}
			switch {
			case found && m.ProviderID == "":
				if err := fleet.Launched(p.ownMachine(m), inv.Instances[i], p.now); err == nil {
					p.plan.Adoptions = append(p.plan.Adoptions, Adoption{Machine: m.ID, Instance: inv.Instances[i]})
				}
			case !found && m.ProviderID != "" && m.FleetState != api.FleetTerminating && instanceKnownBefore(m, inv.At):
				p.terminate(m, CauseVanished, "instance "+m.ProviderID+" no longer exists", false)
			}
		}
		for i, inst := range inv.Instances {
			if owned[i] {
				continue
			}
			m := p.machine(inst.Tags[provisioner.TagMachine])
			if (m == nil || !m.Live()) && p.now.Sub(inst.LaunchedAt) > p.cfg.OrphanGrace {
				p.plan.Orphans = append(p.plan.Orphans, Orphan{ProviderKey: key, Instance: inst})
			}
		}
	}
}

// instanceKnownBefore: Gantry knew m's instance before at (machines of
// before the time was kept count from their creation).
func instanceKnownBefore(m *api.Machine, at time.Time) bool {
	known := m.CreatedAt
	if m.InstanceKnownAt != nil {
		known = *m.InstanceKnownAt
	}
	return known.Before(at)
}

// listProviders asks for the tagged instances of every provider in use
// that launches machines, when this leader has not listed it yet or not
// for ResyncInterval. A provider this leader listed before stays listed
// after its last cluster is deleted: what that cluster left (an instance
// whose launch answer was lost, an overlay's firewall) is found then.
func (p *Pass) listProviders() {
	keys := map[string]bool{}
	for key := range p.snap.ListedAt {
		keys[key] = true
	}
	for _, cp := range p.snap.Catalogs {
		if cp.Key != "" {
			keys[cp.Key] = true
		}
	}
	if c := p.counts(); c != nil {
		for _, key := range c.keys {
			keys[key] = true
		}
	} else {
		last := ""
		for _, m := range p.machines { // a fleet's machines share a few keys
			if key := registry.KeyOf(m); key != last {
				keys[key], last = true, key
			}
		}
	}
	for key := range keys {
		name, _, _ := strings.Cut(key, ":")
		last, listed := p.snap.ListedAt[key]
		_, fresh := p.snap.Inventories[key]
		if !p.snap.Providers[name].Provisions || fresh || p.inFlight(CallList, key) || (listed && !p.reached(last.Add(p.cfg.ResyncInterval))) {
			continue
		}
		p.plan.Lists = append(p.plan.Lists, key)
	}
	sort.Strings(p.plan.Lists)
}

// detectLost marks joined machines whose heartbeats stopped unreachable
// (the planner replaces them at once) and, after the reschedule grace,
// terminates them, which reschedules their replicas. Silence before
// LivenessSince does not count: a server that just started (or whose
// store was failing) gives every machine a full period to reach it.
func (p *Pass) detectLost() {
	limit := p.cfg.HeartbeatIntervalFor(p.live) * time.Duration(p.cfg.MissedHeartbeats)
	// A beat at or after heardBy is within the limit: one comparison a
	// machine, not a difference of times each.
	heardBy := p.now.Add(-limit)
	for i := range p.silenceSuspects(heardBy) {
		m := p.machines[i]
		if !watchedForSilence(m) {
			continue
		}
		last := lastSign(p.snap.heartbeat(i, m), p.snap.LivenessSince)
		switch {
		case !last.Before(heardBy):
			if m.UnreachableSince != nil { // SilentAt watches the others
				p.passed(last.Add(limit))
			}
		case m.UnreachableSince == nil:
			why := fmt.Sprintf("no heartbeat for %s (limit %s); replicas move after %s unless it returns",
				p.now.Sub(last).Round(time.Second), limit, p.cfg.RescheduleGrace)
			if fleet.MarkUnreachable(p.ownMachine(m), why, p.now) {
				p.plan.Unreachable = append(p.plan.Unreachable, MachineStep{Machine: m.ID, Reason: why})
			}
		case p.reached(m.UnreachableSince.Add(p.cfg.RescheduleGrace)):
			if group := p.onlyCopyOn(m.ID); group != "" {
				p.holdOnlyCopy(m, group)
				continue
			}
			p.terminate(m, CauseUnreachable, fmt.Sprintf("unreachable for %s (no heartbeat since %s)",
				p.now.Sub(*m.UnreachableSince).Round(time.Second), last.UTC().Format(time.RFC3339)), false)
		}
	}
}

// silenceSuspects are the positions of the machines detectLost looks
// at, in order: every machine, unless the snapshot's HeardFrom vouches
// that all but a few beat at or after heardBy and the census says which
// are unreachable already; then those few and the unreachable ones (at
// 10,000 machines, reading every heartbeat was a twentieth of a steady
// pass, to find none silent).
func (p *Pass) silenceSuspects(heardBy time.Time) iter.Seq[int] {
	heard, c := p.snap.HeardFrom, p.fleet()
	if heard == nil || c == nil || heard.Since.Before(heardBy) {
		return func(yield func(int) bool) {
			for i := range p.machines {
				if !yield(i) {
					return
				}
			}
		}
	}
	at := slices.Clone(c.unreachable)
	for id := range heard.Except {
		if i, ok := findByID(p.machines, p.sortedMachines, id, apiMachineID); ok {
			at = append(at, i)
		}
	}
	slices.Sort(at)
	return slices.Values(slices.Compact(at))
}

// onlyCopyOn is the failover group whose only up-to-date data lives on
// the machine: its primary's, while the group cannot fail over to its
// replica (being promoted, the replica not ready, or not promotable
// without losing writes), or, while the old primary is fenced or stopped
// for a switchover, the replica about to be promoted. Replacing such a
// machine for a silence would lose the data, so it is kept until it
// heartbeats again or the group moves on. "" when there is none.
func (p *Pass) onlyCopyOn(machine string) string {
	for _, g := range p.snap.FailoverGroups {
		st, ok := p.mem.Failover[g.Metadata.Name]
		if !ok {
			continue
		}
		switch st.Phase {
		case failover.PhasePromoting, failover.PhaseDegraded, failover.PhasePrimaryFailed:
			if InstanceMachine(st.Holder) == machine {
				return g.Metadata.Name
			}
		case failover.PhaseFencing, failover.PhaseSwitchover:
			if p.sideRunsOn(g, st.Target, machine) {
				return g.Metadata.Name
			}
		}
	}
	return ""
}

// sideRunsOn says whether a replica of a group's side (by home) is on the
// machine.
func (p *Pass) sideRunsOn(g *api.FailoverGroup, home, machine string) bool {
	cluster := g.Spec.Primary.Cluster
	if home == failover.HomeReplica {
		cluster = g.Spec.Replica.Cluster
	}
	service := spec.FailoverMemberName(g.Metadata.Name, cluster)
	for _, r := range p.replicas {
		if r.Service == service && r.Machine == machine {
			return true
		}
	}
	return false
}

// holdOnlyCopy keeps an unreachable machine that holds a failover group's
// only copy, saying so once (an Unreachable step with the new reason).
func (p *Pass) holdOnlyCopy(m *api.Machine, group string) {
	why := fmt.Sprintf("unreachable, kept: it holds the only up-to-date copy of failover group %s (phase %s); kept until it heartbeats again or the group moves on",
		group, p.mem.Failover[group].Phase)
	if m.Reason != why {
		p.plan.Unreachable = append(p.plan.Unreachable, MachineStep{Machine: m.ID, Reason: why})
	}
}

// finishReplacements drains each machine a consolidation replaced once
// its replacement takes replicas (joined, ready, reachable, not
// cordoned), while the replacement still costs less, as Karpenter
// drains a node once its replacement is ready.
// Left to consolidation to move its replicas, a replacement that joined
// while the cluster grew (consolidation waits then) sat empty until its
// EmptyMachineTTL removed it, and the machine was replaced again, and
// again.
func (p *Pass) finishReplacements() {
	for _, m := range p.machinesIn(func(c *fleetCensus) []int { return c.replacing }) {
		if m.Replaces == "" || !m.Schedulable() {
			continue
		}
		if old := p.machine(m.Replaces); old != nil && old.Schedulable() && m.PricePerHour < old.PricePerHour {
			p.drain(old, "replaced by "+m.ID+", which costs less")
		}
	}
}

// finishDrains terminates draining machines that hold no replica any
// more, or whose deadline has passed.
func (p *Pass) finishDrains() {
	draining := p.drainingCandidates()
	if !slices.ContainsFunc(draining, func(m *api.Machine) bool { return m.FleetState == api.FleetDraining }) {
		return // counting what each machine holds walks every replica
	}
	held, ok := p.drainingHolds()
	if !ok {
		held = p.walkDrainingHolds()
	}
	for _, m := range draining {
		if m.FleetState != api.FleetDraining {
			continue
		}
		switch {
		case held[m.ID] == 0:
			p.terminate(m, CauseDrained, "drained: "+m.Reason, false)
		case m.DrainDeadline != nil && p.passed(*m.DrainDeadline):
			p.terminate(m, CauseDrained, fmt.Sprintf("drain deadline passed with %d replica(s) still on it", held[m.ID]), false)
		}
	}
}

// walkDrainingHolds is drainingHolds by a walk of the replicas, until
// each draining machine is found holding one (a few, looked up by
// replica); what a machine holds is counted in full only for one whose
// deadline passed, for its message (before any terminates).
func (p *Pass) walkDrainingHolds() map[string]int {
	held := map[string]int{}
	draining := p.drainingCandidates()
	for _, m := range draining {
		if m.FleetState == api.FleetDraining {
			held[m.ID] = 0
		}
	}
	unfound := len(held)
	p.eachHeld(func(machine string) bool {
		if n, ok := held[machine]; ok && n == 0 {
			held[machine] = 1
			unfound--
		}
		return unfound > 0
	})
	for _, m := range draining {
		if m.FleetState == api.FleetDraining && held[m.ID] > 0 && m.DrainDeadline != nil && p.now.After(*m.DrainDeadline) {
			held[m.ID] = p.heldOn(m.ID)
		}
	}
	return held
}

// heldOn counts the replicas on a machine, copies moving off it included.
func (p *Pass) heldOn(machine string) int {
	n := 0
	p.eachHeld(func(m string) bool {
		if m == machine {
			n++
		}
		return true
	})
	return n
}

// eachHeld visits the machine of every running replica (retiring ones
// included) and the one a moving copy leaves, until visit returns false.
func (p *Pass) eachHeld(visit func(machine string) bool) {
	for _, list := range [][]*api.Replica{p.replicas, p.retiring} {
		for _, r := range list {
			if r.Machine != "" && !visit(r.Machine) || r.PreviousMachine != "" && !visit(r.PreviousMachine) {
				return
			}
		}
	}
}

// followLaunches follows machines that have not joined: an intent whose
// provider call is not running is sent (again: the launch key makes it
// idempotent, and after a server restart nothing is running); a machine
// that takes too long to join is replaced, with what its console says;
// one whose instance vanished, or is not running within LaunchTimeout,
// too.
func (p *Pass) followLaunches() {
	for _, m := range p.machinesIn(func(c *fleetCensus) []int { return c.launching }) {
		if !m.Launching() || !p.provisions(m) || isPlaceholder(m) {
			continue
		}
		if p.passed(m.CreatedAt.Add(p.cfg.JoinTimeout)) {
			p.terminate(m, CauseJoinTimeout, fmt.Sprintf("did not join within %s", p.cfg.JoinTimeout), m.ProviderID != "")
			continue
		}
		if m.ProviderID == "" {
			if m.JoinState == api.JoinProvisioning && !p.inFlight(CallLaunch, m.ID) {
				p.plan.LaunchCalls = append(p.plan.LaunchCalls, m.ID)
			}
			continue
		}
		obs, seen := p.snap.Instances[m.ID]
		switch {
		case seen && (!obs.Found || obs.State == provisioner.StateTerminated || obs.State == provisioner.StateTerminating):
			p.terminate(m, CauseVanished, "instance "+m.ProviderID+" disappeared before joining", false)
			continue
		case seen && obs.State != provisioner.StateRunning && p.passed(m.CreatedAt.Add(p.cfg.LaunchTimeout)):
			p.terminate(m, CauseLaunchTimeout, fmt.Sprintf("instance %s not running within %s (it is %s)", m.ProviderID, p.cfg.LaunchTimeout, obs.State), false)
			continue
		}
		known := m.CreatedAt
		if m.InstanceKnownAt != nil {
			known = *m.InstanceKnownAt
		}
		if (!seen || p.reached(obs.At.Add(p.cfg.DescribeWait(known, obs.At)))) && !p.inFlight(CallDescribe, m.ID) {
			p.plan.Describes = append(p.plan.Describes, m.ID)
		}
	}
}

// followTerminations calls the provider for every terminating machine,
// unless a call runs already or a failed one backs off.
func (p *Pass) followTerminations() {
	for _, m := range p.machinesIn(func(c *fleetCensus) []int { return c.terminating }) {
		if m.FleetState != api.FleetTerminating || p.inFlight(CallTerminate, m.ID) {
			continue
		}
		if r, failed := p.mem.Terminations[m.ID]; failed && !p.reached(r.Next) {
			continue
		}
		p.plan.TerminateCalls = append(p.plan.TerminateCalls, m.ID)
	}
}

// drainOrphanedGroups drains machines whose cluster or group is gone.
func (p *Pass) drainOrphanedGroups() {
	exists := map[string]bool{}
	for name, cl := range p.snap.Clusters {
		for _, g := range cl.Spec.CapacityGroups {
			exists[planner.Key(name, g.GroupID)] = true
		}
	}
	inSpec := runMemo(func(k [2]string) bool { return exists[planner.Key(k[0], k[1])] })
	if p.census != nil && !p.census.orphaned(exists, planner.Key) && !p.ownMachineOrphaned(inSpec) {
		return
	}
	for _, m := range p.machines {
		if m.Live() && m.FleetState != api.FleetTerminating && m.FleetState != api.FleetDraining && !inSpec([2]string{m.Cluster, m.Group}) {
			if m.FleetState == api.FleetStopped {
				p.terminate(m, CauseRemoved, "its cluster or capacity group was removed from the spec", false)
				continue
			}
			p.drain(m, "its cluster or capacity group was removed from the spec")
		}
	}
}

// ownMachineOrphaned: a machine the pass changed or launched is in use in
// a group the spec no longer has. With the census of the machines as the
// pass found them, which says the same of those it did not change, it
// answers for every machine without a walk of each (a pass that drained
// or launched one walked them all).
func (p *Pass) ownMachineOrphaned(inSpec func([2]string) bool) bool {
	for m := range p.mineMachines {
		if m.Live() && m.FleetState != api.FleetTerminating && m.FleetState != api.FleetDraining && !inSpec([2]string{m.Cluster, m.Group}) {
			return true
		}
	}
	return false
}

// runMemo answers look(key) once for each run of equal keys: a fleet's
// machines share a few providers and groups, so a walk of 50,000 looks
// one up about as often as it changes (building a group's key and
// hashing it for each machine cost a pass milliseconds).
func runMemo[K comparable, V any](look func(K) V) func(K) V {
	var last K
	var answer V
	var known bool
	return func(key K) V {
		if !known || key != last {
			last, answer, known = key, look(key), true
		}
		return answer
	}
}
