package sim

import (
	"context"
	"fmt"
	"reflect"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/decide"
	"github.com/gantry-dev/gantry/decide/playback"
	"github.com/gantry-dev/gantry/replica"
	"github.com/gantry-dev/gantry/sim/trace"
)

// run is one policy's simulation.
type run struct {
	setup  Setup
	policy Policy
	cfg    decide.Config
	w      playback.World
	mem    decide.Memory
	cloud  *cloud
	agenda *agenda
	// heard are the events the controller learns of from heartbeats
	// (replicas' starts): they trigger no pass.
	heard  *agenda
	ledger *ledger
	bound  *bounder
	end    time.Time
	// row is the next trace row to apply; price the next spot price
	// change.
	row, price int
	// last is the last pass's plan (its wake).
	last decide.Plan
	// changes are what changed since the last pass, which booked its
	// machines into booked; scratch is the passes' working memory.
	changes *changes
	tally   *tally
	booked  *decide.Booking
	scratch decide.Scratch
	// verify: decide every pass afresh too, and fail if it decides
	// otherwise than the pass from the last booking (tests).
	verify bool
	// made: what the plans since the last pass appended, out of the
	// store's order (at first, the whole snapshot).
	made appended
	res  Result
	// joining are the replicas on the machines joining at this instant
	// (happen).
	joining map[string][]*api.Replica
	// woke says what the instant the clock is at was for (nextInstant):
	// the label of its passes' CPU samples when Setup.LabelPasses asks.
	woke string
	// replacing are the machines a plan replaces with a cheaper one: a
	// machine is drained only once its successor joined, by a later pass
	// that finds its replicas fit elsewhere, and counts as replaced.
	replacing map[string]bool
}

// loop moves the clock from instant to instant: at each, what the trace
// and the world bring happens, then the control loop passes until it is
// quiet; then the clock jumps to the next instant anything could change.
func (r *run) loop(ctx context.Context) error {
	now := r.w.Now
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("given up after %s of the trace: %w", now.Sub(r.ledger.start), err)
		}
		r.w.Now = now
		if err := r.happen(now); err != nil {
			return err
		}
		acting, err := r.passes()
		if err != nil {
			return err
		}
		if acting {
			r.res.Passes.Unsettled++
		}
		r.bound.sample(now, r)
		next := r.nextInstant(now, acting)
		if next.IsZero() || !next.Before(r.end) {
			r.ledger.advance(now, r.end)
			return nil
		}
		r.ledger.advance(now, next)
		now = next
	}
}

// happen applies the trace's rows and the world's events due now.
func (r *run) happen(now time.Time) error {
	rows := r.setup.Trace.Rows
	for r.row < len(rows) && !rows[r.row].At.After(now) {
		if err := r.demand(rows[r.row]); err != nil {
			return err
		}
		r.row++
	}
	r.reprice(now)
	due := append(r.agenda.due(now), r.heard.due(now)...)
	r.joining = r.replicasJoining(due)
	for _, e := range due {
		if err := r.eventHappens(e); err != nil {
			return err
		}
	}
	r.joining = nil
	return nil
}

// replicasJoining are the replicas placed on the machines whose agents
// join among events, by machine, in the order of the snapshot's list
// (their starts are drawn in it): the list is in the store's order but
// for the replicas the last plans appended, at its end. Each machine's
// are found through the tally, not by a walk of every replica (one walk
// for all of them still read 60,000 replicas whenever a machine joined).
func (r *run) replicasJoining(events []event) map[string][]*api.Replica {
	var joining map[string][]*api.Replica
	for _, e := range events {
		if e.Kind == agentJoins {
			if joining == nil {
				joining = map[string][]*api.Replica{}
			}
			joining[e.Machine] = nil
		}
	}
	if joining == nil {
		return nil
	}
	all := r.w.Snap.Replicas
	appended := all[max(len(all)-r.made.replicas, 0):]
	last := make(map[*api.Replica]bool, len(appended))
	for _, rep := range appended {
		last[rep] = true
	}
	for m := range joining {
		var on []*api.Replica
		for _, rep := range r.w.ReplicasOnOrOff(m) {
			if rep.Machine == m && !last[rep] {
				on = append(on, rep)
			}
		}
		slices.SortFunc(on, byServiceAndID)
		for _, rep := range appended {
			if rep.Machine == m {
				on = append(on, rep)
			}
		}
		joining[m] = on
	}
	return joining
}

func (r *run) eventHappens(e event) error {
	switch e.Kind {
	case launchAnswered:
		return r.cloud.launchAnswered(e.Machine)
	case agentJoins:
		if err := r.cloud.agentJoins(e.Machine); err != nil {
			return err
		}
		r.startAll(e.Machine)
	case terminated:
		return r.cloud.terminated(e.Machine)
	case interrupted:
		if r.cloud.interrupted(e.Machine) {
			r.res.Spot.Interruptions++
			r.lost(e.Machine, true)
		}
	case replicaStarts:
		rep := r.w.ReplicaByID(e.Replica)
		if rep == nil || rep.Machine != e.Machine || rep.Incarnation != e.Incarnation || rep.State == api.ReplicaRunning && rep.PreviousMachine == "" {
			return nil
		}
		r.changes.replica(rep)
		if _, err := replica.Observe(rep, api.ReplicaStatus{ReplicaID: rep.ID, State: api.ReplicaRunning, Health: api.HealthHealthy}, "", r.w.Now); err != nil {
			return err
		}
		r.track(rep, false)
	}
	return nil
}

// demand applies a trace row: the service wants that many replicas (and
// requests, when the row says), as `gantry apply` of its edited spec would.
func (r *run) demand(row trace.Row) error {
	i := slices.IndexFunc(r.w.Snap.Services, func(s *api.Service) bool { return s.Metadata.Name == row.Service })
	if i < 0 {
		return fmt.Errorf("trace line %d: service %s is not in the spec", row.Line, row.Service)
	}
	svc := *r.w.Snap.Services[i]
	svc.Spec.Replicas = &row.Replicas
	if o := row.Requests; o.MilliCPU != nil || o.MemoryBytes != nil || o.GPUs != nil {
		res := svc.Spec.Resources
		if o.MilliCPU != nil {
			res.CPU = fmt.Sprintf("%dm", *o.MilliCPU)
		}
		if o.MemoryBytes != nil {
			res.Memory = fmt.Sprint(*o.MemoryBytes)
		}
		if o.GPUs != nil {
			gpu := api.GPURequirement{}
			if res.GPU != nil {
				gpu = *res.GPU
			}
			gpu.Count = *o.GPUs
			res.GPU = &gpu
			if gpu.Count == 0 {
				res.GPU = nil
			}
		}
		svc.Spec.Resources = res
	}
	svc.Metadata.Generation++
	r.w.Snap.Services[i] = &svc
	r.changes.service(svc.Metadata.Name)
	r.bound.demandChanged()
	return nil
}

// reprice applies the spot price changes due: to the catalogs the control
// loop prices new machines with, and to the bills of the spot machines of
// that type and zone (the machines keep the price they were launched at in
// the store, as Gantry does not reprice running machines).
func (r *run) reprice(now time.Time) {
	changes := r.setup.SpotPrices
	for r.price < len(changes) && !changes[r.price].At.After(now) {
		pc := changes[r.price]
		for _, cp := range r.w.Snap.Catalogs {
			for i := range cp.Catalog {
				if cp.Catalog[i].Name != pc.InstanceType {
					continue
				}
				for j, o := range cp.Catalog[i].Offerings {
					if o.Zone == pc.Zone && o.CapacityType == api.CapacitySpot {
						cp.Catalog[i].Offerings[j].PricePerHour = pc.PricePerHour
					}
				}
			}
		}
		r.ledger.reprice(pc.InstanceType, pc.Zone, pc.PricePerHour)
		r.bound.demandChanged()
		r.price++
	}
}

// passes runs the control loop at one instant until a pass is quiet (it
// acts on nothing and asks nothing of a provider), at most the world's
// bound; it reports whether the last pass still acted.
func (r *run) passes() (bool, error) {
	// The agents beat once an instant: a pass at the same instant again
	// would see the same beats.
	r.cloud.heartbeat()
	r.w.Snap.HeardFrom = &decide.HeardFrom{Since: r.w.Now, Except: r.cloud.silent}
	if r.verify {
		if err := r.checkHeartbeats(); err != nil {
			return false, err
		}
	}
	for i := 0; i < r.setup.World.MaxPassesPerInstant; i++ {
		plan, err := r.labelledDecide(i)
		if err != nil {
			return false, err
		}
		r.w.Snap.Inventories = map[string]decide.Inventory{}
		r.count(plan)
		if err := r.apply(plan); err != nil {
			return false, err
		}
		r.last = plan
		if !plan.Acts() && len(plan.Describes)+len(plan.Lists) == 0 {
			return false, nil
		}
	}
	return true, nil
}

// labelledDecide is decide, its CPU samples labelled with what woke the
// instant, the pass's place in it ("1", "2", "3+") and the trace's day
// ("day1", "day2"…; not a bare number, which pprof's -tagfocus reads as
// a range) when the setup asks (LabelPasses).
func (r *run) labelledDecide(i int) (plan decide.Plan, err error) {
	if !r.setup.LabelPasses {
		return r.decide()
	}
	pprof.Do(context.Background(), pprof.Labels(r.passLabels(i)...), func(context.Context) { plan, err = r.decide() })
	return plan, err
}

// passLabels are the labels of the instant's pass i (from 0), as key
// and value pairs.
func (r *run) passLabels(i int) []string {
	place := [...]string{"1", "2", "3+"}[min(i, 2)]
	day := fmt.Sprintf("day%d", 1+int(r.w.Now.Sub(r.ledger.start)/(24*time.Hour)))
	return []string{"woke", r.woke, "pass", place, "day", day}
}

// checkHeartbeats fails if a joined machine whose instance runs was not
// heard from now, or one whose instance went was (tests: the beats are
// kept without a walk of every machine).
func (r *run) checkHeartbeats() error {
	for _, m := range r.w.Snap.Machines {
		if m.JoinState != api.JoinJoined {
			continue
		}
		heard := m.LastHeartbeat != nil && m.LastHeartbeat.Equal(r.w.Now)
		if beats := r.cloud.alive(m.ID); heard != beats {
			return fmt.Errorf("at %s machine %s (its instance running: %v) was last heard from at %v", r.w.Now, m.ID, beats, m.LastHeartbeat)
		}
	}
	return nil
}

// decide runs a pass from the last pass's booking and what changed
// since, in the store's order, as the controller does.
func (r *run) decide() (decide.Plan, error) {
	snap := r.w.Snap
	inStoreOrder(snap, r.made)
	r.made = appended{}
	changed := r.changes.take()
	r.tally.update(&r.w, changed.Replicas)
	r.tally.drains(&r.w, changed.Machines)
	r.tally.vouch(snap)
	snap.Booked, snap.Changed, snap.Scratch = r.booked, changed, &r.scratch
	plan := decide.Decide(r.cfg, snap, r.mem, r.w.Now)
	snap.Booked, snap.Changed, snap.Scratch = nil, nil, nil
	r.booked = plan.Booked
	if r.verify {
		for _, m := range snap.Machines {
			if draining := m.FleetState == api.FleetDraining; draining != r.tally.draining[m.ID] {
				return plan, fmt.Errorf("machine %s drains: %v, the run's tally says %v", m.ID, draining, r.tally.draining[m.ID])
			}
		}
		if !slices.IsSortedFunc(snap.Replicas, byServiceAndID) || !slices.IsSortedFunc(snap.Machines, byMachineID) {
			return plan, fmt.Errorf("the run vouched for the store's order, but its replicas or machines are out of it")
		}
		walked := *snap
		walked.InStoreOrder, walked.MachinesByID = false, false
		walked.Unplaced, walked.Retiring, walked.Moving, walked.Draining, walked.Orphaned = nil, nil, nil, nil, nil
		full := decide.Decide(r.cfg, &walked, r.mem, r.w.Now)
		if diff := plan.Booked.Differs(full.Booked); diff != "" {
			return plan, fmt.Errorf("a pass booked from the last booking otherwise than afresh: %s", diff)
		}
		kept, fresh := plan, full
		kept.Booked, fresh.Booked = nil, nil
		if !reflect.DeepEqual(kept, fresh) {
			return plan, fmt.Errorf("a pass from the last booking decided otherwise than one afresh:\n%+v\n%+v", kept, fresh)
		}
	}
	return plan, nil
}

// apply plays the plan back as the act step, then answers its provider
// calls and follows its replicas.
func (r *run) apply(plan decide.Plan) error {
	for _, d := range plan.DeleteReplicas {
		r.ledger.cameUp(d.ID, r.w.Now) // no longer wanted
	}
	for _, d := range plan.RetireReplicas {
		r.ledger.cameUp(d.ID, r.w.Now)
	}
	terminating := make([]string, 0, len(plan.Terminates))
	for _, t := range plan.Terminates {
		terminating = append(terminating, t.Machine)
	}
	machines := r.changes.beforeApply(&r.w, plan, r.verify)
	r.made.add(plan)
	if err := r.w.Apply(plan); err != nil {
		return err
	}
	if r.verify {
		if i := slices.IndexFunc(r.w.Snap.Machines, func(m *api.Machine) bool { return !m.Live() }); i >= 0 {
			return fmt.Errorf("machine %s ended, but is still in the store after a plan", r.w.Snap.Machines[i].ID)
		}
		if err := r.addressesApart(); err != nil {
			return err
		}
	}
	if err := r.changes.afterApply(&r.w, plan, machines, r.mem, plan.Memory); err != nil {
		return err
	}
	r.mem = plan.Memory
	r.cloud.describe(plan.Describes)
	r.cloud.list(plan.Lists)
	for _, s := range plan.Stops {
		r.ledger.pause(s.Machine, true)
	}
	for _, s := range plan.Starts {
		r.ledger.pause(s.Machine, false)
		r.cloud.unbeat(s.Machine) // started with a heartbeat of its own
	}
	for _, u := range plan.Unreachable {
		r.cloud.unbeat(u.Machine)
	}
	tail := r.w.Snap.Replicas[len(r.w.Snap.Replicas)-len(plan.CreateReplicas):]
	for _, rep := range tail {
		r.track(rep, true)
	}
	for _, a := range plan.Assignments {
		if rep := r.w.ReplicaByID(a.Replica); rep != nil {
			r.start(rep)
			r.track(rep, false)
		}
	}
	for _, e := range plan.Evictions {
		if rep := r.w.ReplicaByID(e.Replica); rep != nil {
			r.track(rep, false)
		}
	}
	for _, id := range terminating {
		r.lost(id, false)
	}
	return nil
}

// addressesApart fails if two machines whose instances run share an
// address (tests: a replica's address is its machine's, off an overlay).
func (r *run) addressesApart() error {
	holder := map[string]string{}
	for _, m := range r.w.Snap.Machines {
		if !r.cloud.alive(m.ID) {
			continue
		}
		for _, a := range m.Addresses {
			if other, taken := holder[a]; taken {
				return fmt.Errorf("at %s machines %s and %s both have address %s", r.w.Now, other, m.ID, a)
			}
			holder[a] = m.ID
		}
	}
	return nil
}

// start schedules a placed replica's start, when its machine has joined
// (otherwise its agent starts it when it joins).
func (r *run) start(rep *api.Replica) {
	m := r.w.MachineByID(rep.Machine)
	if m == nil || m.JoinState != api.JoinJoined || !r.cloud.alive(m.ID) || rep.State == api.ReplicaRunning && rep.PreviousMachine == "" {
		return
	}
	r.heard.add(event{At: r.w.Now.Add(r.setup.World.ReplicaStart.draw(r.cloud.rng)), Kind: replicaStarts, Machine: rep.Machine,
		Replica: rep.ID, Incarnation: rep.Incarnation})
}

// startAll schedules the starts of the replicas placed on a machine that
// just joined.
func (r *run) startAll(machine string) {
	for _, rep := range r.joining[machine] {
		if rep.Machine == machine {
			r.start(rep)
		}
	}
}

// lost follows the replicas of a machine that was taken back or is
// terminating: those that ran there stop.
func (r *run) lost(machine string, interrupted bool) {
	delete(r.replacing, machine)
	for _, rep := range r.w.ReplicasOnOrOff(machine) {
		r.trackWhy(rep, false, interrupted)
	}
}

func (r *run) track(rep *api.Replica, fresh bool) { r.trackWhy(rep, fresh, false) }

// trackWhy notes whether a wanted replica runs now; one that ran and
// stopped is a disruption.
func (r *run) trackWhy(rep *api.Replica, fresh, interrupted bool) {
	if r.up(rep) {
		r.ledger.cameUp(rep.ID, r.w.Now)
		return
	}
	if _, down := r.ledger.down[rep.ID]; !down && !fresh {
		r.res.Disruptions.ReplicasStopped++
	}
	r.ledger.wentDown(rep.ID, r.w.Now, interrupted)
}

// up: a copy of the replica serves (the one it moves off counts until
// the new one runs).
func (r *run) up(rep *api.Replica) bool {
	if rep.RetiringSince != nil {
		return true
	}
	if rep.PreviousMachine != "" && r.cloud.alive(rep.PreviousMachine) {
		return true
	}
	return rep.State == api.ReplicaRunning && rep.Machine != "" && r.cloud.alive(rep.Machine)
}

// nextInstant is the earliest time anything could change: the next
// trace row, world event, deadline of the last pass, machine falling
// silent, or bound to plan. What triggers a pass (a row is an apply; a
// provider's answer and a join trigger one) is decided on the world's
// grain; what does not (a replica's start, heard in a heartbeat; a
// deadline; silence) at the controller's next tick (onTick).
func (r *run) nextInstant(now time.Time, acting bool) time.Time {
	if acting { // the passes were cut short: pass again soon
		r.woke = wokeUnsettled
		return now.Add(time.Second)
	}
	if t, ok := r.agenda.next(); ok && !t.After(now) {
		r.woke = wokeWorld
		return now // an answer without latency: at this instant still
	}
	var next time.Time
	note := func(t time.Time, on func(time.Time) time.Time, why string) {
		if !t.After(now) {
			return
		}
		if t = on(t); next.IsZero() || t.Before(next) {
			next, r.woke = t, why
		}
	}
	tick := func(t time.Time) time.Time { return r.onTick(now, t) }
	if r.row < len(r.setup.Trace.Rows) {
		note(r.setup.Trace.Rows[r.row].At, r.onGrain, wokeTrace)
	}
	if r.price < len(r.setup.SpotPrices) {
		note(r.setup.SpotPrices[r.price].At, r.onGrain, wokePrice)
	}
	if t, ok := r.agenda.next(); ok {
		note(t, r.onGrain, wokeWorld)
	}
	if t, ok := r.heard.next(); ok {
		if !t.After(now) {
			t = now.Add(time.Nanosecond) // heard already: at the next tick
		}
		note(t, tick, wokeHeard)
	}
	note(r.last.Wake.At, tick, wokeDeadline)
	note(r.silentAt(), tick, wokeSilence)
	note(r.bound.due(), r.onGrain, wokeBound)
	return next
}

// What an instant was for (run.woke): the first of them at once when
// several fall on it, in nextInstant's order.
const (
	wokeStart     = "start"     // the trace's first instant
	wokeUnsettled = "unsettled" // the last instant's passes were cut short
	wokeTrace     = "trace"     // a row of demand
	wokePrice     = "price"     // a spot price change
	wokeWorld     = "world"     // a provider's answer, an agent's join, an interruption
	wokeHeard     = "heard"     // a replica's start, heard in a heartbeat
	wokeDeadline  = "deadline"  // a deadline the last pass set (Plan.Wake)
	wokeSilence   = "silence"   // a machine gone silent
	wokeBound     = "bound"     // the LP bound's sample
)

// onTick is when a controller whose last pass was at now first passes at
// or after t with nothing triggering it: every ReconcileInterval from
// now (on the grain when the interval is 0).
func (r *run) onTick(now, t time.Time) time.Time {
	iv := r.setup.World.ReconcileInterval
	if iv <= 0 {
		return r.onGrain(t)
	}
	ticks := (t.Sub(now) + iv - 1) / iv
	return now.Add(ticks * iv)
}

// onGrain puts an instant on the world's grain (from the trace's start)
// at or after it: the control loop notices what happened in between at
// once, as a controller triggered by each would within its pass.
func (r *run) onGrain(t time.Time) time.Time {
	g := r.setup.World.PassGrain
	if t.IsZero() || g <= 0 {
		return t
	}
	since := t.Sub(r.ledger.start)
	if rest := since % g; rest != 0 {
		since += g - rest
	}
	return r.ledger.start.Add(since)
}

// silentAt is when the first machine whose instance is gone looks silent
// to the control loop (the agents of the others heartbeat all along: the
// run makes them beat at every instant). A gone machine that left the
// store or is no longer joined is let go of: it joins again only with
// its instance. The silent machines are looked up, few, not found in a
// walk of every machine.
func (r *run) silentAt() time.Time {
	silent := r.cloud.silent
	if len(silent) == 0 {
		return time.Time{}
	}
	live := r.last.LiveMachines
	limit := r.cfg.HeartbeatIntervalFor(live) * time.Duration(r.cfg.MissedHeartbeats)
	var first time.Time
	for id := range silent {
		m := r.w.MachineByID(id)
		if m == nil || m.JoinState != api.JoinJoined {
			delete(silent, id)
			continue
		}
		if m.LastHeartbeat == nil || m.UnreachableSince != nil {
			continue
		}
		at := m.LastHeartbeat.Add(limit + time.Nanosecond)
		if first.IsZero() || at.Before(first) {
			first = at
		}
	}
	return first
}

// count notes what a pass decided.
func (r *run) count(plan decide.Plan) {
	p := &r.res.Passes
	p.Total++
	steps := len(plan.CreateReplicas) + len(plan.DeleteReplicas) + len(plan.RetireReplicas) + len(plan.Launches) + len(plan.Starts) +
		len(plan.Stops) + len(plan.Drains) + len(plan.Terminates) + len(plan.Evictions) + len(plan.Assignments)
	if plan.Acts() {
		p.Acting++
	}
	p.Steps += steps
	d := &r.res.Disruptions
	d.Launches += len(plan.Launches)

	for _, a := range plan.Assignments {
		if a.Moving() {
			d.ReplicasMoved++
		}
	}
	for _, t := range plan.Terminates {
		d.Terminations[t.Cause]++
	}
	for _, rm := range plan.Capacity.Remove {
		if rm.ReplacedBy != "" {
			r.replacing[rm.MachineID] = true
		}
	}
	for _, dr := range plan.Drains {
		if r.replacing[dr.Machine] { // drained once its replacement joined (or for another reason since)
			delete(r.replacing, dr.Machine)
			d.MachinesReplaced++
			continue
		}
		i := slices.IndexFunc(plan.Capacity.Remove, func(rm api.MachineRemoval) bool { return rm.MachineID == dr.Machine })
		switch {
		case i < 0:
		case strings.HasPrefix(plan.Capacity.Remove[i].Reason, "empty"):
			d.MachinesEmptied++
		default:
			d.MachinesConsolidated++
		}
	}
}

// result is the run's report.
func (r *run) result() Result {
	waiting := r.ledger.finish()
	l := r.ledger
	res := r.res
	res.WaitingAtEnd = waiting
	res.Policy, res.Settings, res.Over, res.World = r.policy.Name, r.policy.Settings, r.policy.Over, r.setup.WorldName
	res.Start, res.End = l.start, l.end
	res.Cost, res.Bound = l.cost, l.boundCost
	if l.boundCost > 0 {
		res.Gap = l.cost/l.boundCost - 1
	}
	res.MachineHours = l.typeHours()
	res.Pending = percentiles(l.episodes)
	res.Spot.Pending = percentiles(l.spotEpisodes)
	res.Disruptions.LaunchFailures = l.launchFailures
	if res.Passes.Total > 0 {
		res.Passes.StepsPerPass = float64(res.Passes.Steps) / float64(res.Passes.Total)
	}
	res.Series = l.series
	return res
}
