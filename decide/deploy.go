package decide

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/replica"
)

// A deployment moves a service's replicas to its current revision, index
// by index, as Kubernetes Deployments and Nomad's update block do:
//
//   - a new replica is available once it has run and passed its health
//     check (where it has one) for minHealthySeconds;
//   - old replicas stop only while the service keeps replicas −
//     maxUnavailable available, and at most replicas + maxSurge run;
//   - canaries start beside the old replicas and wait to be promoted;
//   - a new replica that crashes or fails its health check, or no progress
//     within progressDeadline, fails the revision: its replicas go, the
//     old ones stay, and with autoRevert the service returns to the last
//     revision that completed.
//
// The state is durable (Memory.Deployments), so a server that takes over
// resumes a deployment where it was.
type deployment struct {
	p      *Pass
	svc    *api.Service
	rev    api.Revision
	d      *api.Deployment
	fresh  []*api.Replica // of the revision deployed
	old    []*api.Replica // of any other
	policy api.UpdatePolicy
}

// deployService moves one service towards its current revision; byID
// says its replicas are by id.
func (p *Pass) deployService(svc *api.Service, replicas []*api.Replica, byID, busy bool) {
	rev := p.currentRevision(svc, replicas)
	d := p.deploymentOf(svc, rev, len(replicas) > 0)
	name := svc.Metadata.Name
	last := p.tallies[name] // the last pass's: the pass took its map over (keepTallies)
	delete(p.tallies, name)
	desired := svc.Spec.DesiredReplicas()
	t := p.keptTally(svc, rev, &d, replicas, busy, last)
	if t != nil && t.desired != desired && !p.rescale(t, rev, desired) {
		t = nil
	}
	if t != nil {
		p.keptTallies++
		// As the walk below would find it, and do.
		d.Desired, d.Generation = t.desired, svc.Metadata.Generation
		d.Updated, d.Old, d.Available = t.replicas, 0, t.replicas-len(t.unready)
		p.tallies[name] = t
		delete(p.mem.Promotions, name)
		setEntry(&p.mem.Deployments, &p.owns.deployments, name, d)
		return
	}
	// The list of the revision's replicas is the scratch's (nothing keeps
	// it once the step is done): a list allocated and grown for every
	// step of a service of hundreds was a twentieth of a pass's bytes.
	scratch := p.snap.Scratch.of()
	x := &deployment{p: p, svc: svc, rev: rev, d: &d, policy: svc.Spec.Update, fresh: room(&scratch.deploying, len(replicas))}
	defer func() { scratch.deploying = x.fresh[:0] }()
	compareIDs := func(a, b *api.Replica) int { return strings.Compare(a.ID, b.ID) }
	if !byID && !slices.IsSortedFunc(replicas, compareIDs) { // a run of the pass's list in the store's order is left as it is
		replicas = slices.SortedFunc(slices.Values(replicas), compareIDs)
	}
	// A complete deployment's counts are taken in the same walk, while
	// each replica is at hand (a second walk of a service of 1,500 read
	// each again, a cache miss each): fillAndCount takes them.
	var tally *freshTally
	if d.State == api.DeployComplete {
		tally = &freshTally{held: make([]bool, max(desired, 0)), unready: map[string]bool{}, whole: true}
	}
	for _, r := range replicas {
		switch {
		case r.Index >= desired:
			p.deleteReplica(r, "service scaled down")
			if tally != nil {
				tally.whole = false
			}
		case r.SpecHash == rev.Hash:
			x.fresh = append(x.fresh, r)
			if tally != nil {
				tally.add(x, r)
			}
		default:
			x.old = append(x.old, r)
		}
	}
	d.Desired, d.Generation = desired, svc.Metadata.Generation
	x.observeAvailability()
	switch {
	case d.State == api.DeployFailed:
		x.keepFailed()
		x.count()
	case d.State == api.DeployComplete && len(x.old) == 0:
		x.fillAndCount(tally)
		if tally.whole { // the replicas it made counted too
			p.tallies[name] = &deployTally{revision: rev.Hash, desired: desired, replicas: len(x.fresh), unready: tally.unready,
				dropped: p.retiringOf(name)}
		}
	default:
		if d.State == api.DeployComplete { // replicas of another revision appeared (made by an older gantry)
			d.State, d.ProgressAt, d.AvailableSince = api.DeployProgressing, p.now, map[string]time.Time{}
			x.observeAvailability()
		}
		x.progress()
		x.count()
	}
	delete(p.mem.Promotions, svc.Metadata.Name)
	setEntry(&p.mem.Deployments, &p.owns.deployments, svc.Metadata.Name, d)
}

// deploymentOf is the service's deployment of rev: the one under way, or
// a new one that starts now.
func (p *Pass) deploymentOf(svc *api.Service, rev api.Revision, hasReplicas bool) api.Deployment {
	name := svc.Metadata.Name
	prev, had := p.mem.Deployments[name]
	if had && prev.Revision == rev.Hash {
		// A complete deployment keeps no times (a steady pass over many
		// services copies nothing); the memory's map is shared, so it is
		// copied before it changes.
		prev.AvailableSince = maps.Clone(prev.AvailableSince)
		if prev.AvailableSince == nil && prev.State != api.DeployComplete {
			prev.AvailableSince = map[string]time.Time{}
		}
		prev.Number = rev.Number
		return prev
	}
	d := api.Deployment{Service: name, Revision: rev.Hash, Number: rev.Number, State: api.DeployProgressing,
		StartedAt: p.now, ProgressAt: p.now, AvailableSince: map[string]time.Time{}}
	msg := fmt.Sprintf("revision %d", rev.Number)
	if had {
		d.Stable = prev.Stable
		if prev.State == api.DeployComplete {
			d.Stable = prev.Revision
		}
		if prev.State == api.DeployFailed && prev.Stable == rev.Hash {
			d.RevertOf = prev.Number
		}
		msg = fmt.Sprintf("revision %d replaces revision %d", rev.Number, prev.Number)
	}
	if had || hasReplicas {
		p.event(api.EventNormal, "DeploymentStarted", api.KindService, name, msg)
	}
	return d
}

// observeAvailability notes when each new replica became available
// (while the deployment is under way).
func (x *deployment) observeAvailability() {
	if x.d.AvailableSince == nil {
		return
	}
	seen := map[string]bool{}
	for _, r := range x.fresh {
		seen[r.ID] = true
		if !x.availableNew(r) {
			delete(x.d.AvailableSince, r.ID)
		} else if _, ok := x.d.AvailableSince[r.ID]; !ok {
			x.d.AvailableSince[r.ID] = x.p.now
		}
	}
	for id := range x.d.AvailableSince {
		if !seen[id] {
			delete(x.d.AvailableSince, id)
		}
	}
}

// availableNew: running, and healthy when the revision has a check.
func (x *deployment) availableNew(r *api.Replica) bool { return availableOf(x.rev, r) }

// ready: available for minHealthySeconds (once complete: available).
func (x *deployment) ready(r *api.Replica) bool {
	if x.d.State == api.DeployComplete {
		return x.availableNew(r)
	}
	since, ok := x.d.AvailableSince[r.ID]
	return ok && x.p.reached(since.Add(x.policy.MinHealthy()))
}

func (x *deployment) readyCount() int {
	n := 0
	for _, r := range x.fresh {
		if x.ready(r) {
			n++
		}
	}
	return n
}

func (x *deployment) count() {
	x.d.Updated, x.d.Old, x.d.Available = 0, 0, 0
	for _, r := range x.fresh {
		if !x.p.deleting[r.ID] {
			x.d.Updated++
			if x.ready(r) {
				x.d.Available++
			}
		}
	}
	for _, r := range x.old {
		if !x.p.deleting[r.ID] {
			x.d.Old++
		}
	}
}

// progress takes one step of a deployment under way.
func (x *deployment) progress() {
	p, name := x.p, x.svc.Metadata.Name
	if why := x.failure(); why != "" {
		x.fail(why)
		return
	}
	if x.policy.Paused {
		if x.d.State != api.DeployPaused {
			p.event(api.EventNormal, "DeploymentPaused", api.KindService, name, fmt.Sprintf("revision %d paused", x.rev.Number))
		}
		x.d.State, x.d.ProgressAt = api.DeployPaused, p.now
		x.fillIndexes(x.stableOr())
		return
	}
	if x.d.State == api.DeployPaused {
		p.event(api.EventNormal, "DeploymentResumed", api.KindService, name, fmt.Sprintf("revision %d resumed", x.rev.Number))
		x.d.State, x.d.ProgressAt = api.DeployProgressing, p.now
	}
	if ready := x.readyCount(); ready > x.d.Available {
		x.d.ProgressAt = p.now
	}
	if deadline := x.policy.ProgressDeadline(); p.passed(x.d.ProgressAt.Add(deadline)) {
		x.fail(fmt.Sprintf("no progress for %s (%d of %d replicas of the revision available)%s", deadline, x.readyCount(), x.d.Desired, x.stuck()))
		return
	}
	if x.canaryStep() {
		return
	}
	x.d.State = api.DeployProgressing
	x.roll()
	if x.complete() {
		x.d.State, x.d.Stable, x.d.Reason, x.d.AvailableSince = api.DeployComplete, x.rev.Hash, "", nil
		p.event(api.EventNormal, "DeploymentComplete", api.KindService, name,
			fmt.Sprintf("revision %d: %d replicas available", x.rev.Number, x.d.Desired))
	}
}

func (x *deployment) complete() bool {
	if len(x.fresh) != x.d.Desired {
		return false
	}
	for _, r := range x.old {
		if !x.p.deleting[r.ID] {
			return false
		}
	}
	for _, r := range x.fresh {
		if x.p.deleting[r.ID] || !x.ready(r) {
			return false
		}
	}
	return true
}

// stuck says why the first of the revision's replicas that is not
// available waits.
func (x *deployment) stuck() string {
	for _, r := range x.fresh {
		if !x.ready(r) {
			why := string(r.State)
			if r.Reason != "" {
				why += ": " + r.Reason
			}
			return fmt.Sprintf("; replica %s is %s", r.ID, why)
		}
	}
	return ""
}

// failure says why the revision failed, if one of its replicas did.
func (x *deployment) failure() string {
	for _, r := range x.fresh {
		switch {
		case r.State == api.ReplicaCrashed || r.State == api.ReplicaFailed:
			return fmt.Sprintf("replica %s %s: %s", r.ID, r.State, r.Reason)
		case r.Restarts > 0:
			return fmt.Sprintf("replica %s restarted %d time(s)", r.ID, r.Restarts)
		case r.State == api.ReplicaRunning && r.Health == api.HealthUnhealthy:
			// One that never passed its check while starting fails
			// through the progress deadline.
			return fmt.Sprintf("replica %s fails its health check: %s", r.ID, r.Reason)
		}
	}
	return ""
}

// canaryStep runs the canary phase; it reports whether the deployment
// waits in it.
func (x *deployment) canaryStep() bool {
	p, name := x.p, x.svc.Metadata.Name
	canaries := min(x.policy.Canary, x.d.Desired)
	if canaries == 0 || x.d.Promoted || len(x.old) == 0 {
		return false
	}
	if p.mem.Promotions[name] == x.rev.Hash {
		x.promote("promoted")
		return false
	}
	have := map[int]bool{}
	for _, r := range x.fresh {
		have[r.Index] = true
	}
	for i := 0; i < canaries; i++ {
		if !have[i] {
			x.fresh = append(x.fresh, p.createReplica(x.rev, i))
			x.d.ProgressAt = p.now
		}
	}
	if x.readyCount() < canaries {
		return true
	}
	if x.policy.AutoPromote {
		x.promote("promoted automatically: its canaries are available")
		return false
	}
	if x.d.State != api.DeployWaitingPromotion {
		p.event(api.EventNormal, "CanaryReady", api.KindService, name, fmt.Sprintf(
			"%d canary replica(s) of revision %d are available; `gantry rollout promote %s` rolls out the rest", canaries, x.rev.Number, name))
	}
	x.d.State, x.d.ProgressAt = api.DeployWaitingPromotion, p.now
	return true
}

func (x *deployment) promote(how string) {
	x.d.Promoted, x.d.ProgressAt = true, x.p.now
	x.p.event(api.EventNormal, "DeploymentPromoted", api.KindService, x.svc.Metadata.Name, fmt.Sprintf("revision %d %s", x.rev.Number, how))
}

// roll stops old replicas while enough stay available, and starts new
// ones within maxSurge.
func (x *deployment) roll() {
	p := x.p
	desired := x.d.Desired
	readyAt := map[int]bool{}
	freshAt := map[int]bool{}
	available := 0
	for _, r := range x.fresh {
		freshAt[r.Index] = true
		if x.ready(r) {
			readyAt[r.Index] = true
			available++
		}
	}
	old := append([]*api.Replica(nil), x.old...)
	rank := func(r *api.Replica) int {
		switch {
		case !replica.Available(r):
			return 0
		case readyAt[r.Index]:
			return 1
		}
		return 2
	}
	sort.SliceStable(old, func(i, j int) bool {
		if a, b := rank(old[i]), rank(old[j]); a != b {
			return a < b
		}
		return old[i].Index > old[j].Index
	})
	for _, r := range old {
		if replica.Available(r) {
			available++
		}
	}
	oldAt := map[int]int{}
	remaining := 0
	for _, r := range old {
		avail := replica.Available(r)
		if avail && available-1 < desired-x.policy.Unavailable() {
			oldAt[r.Index]++
			remaining++
			continue
		}
		if avail {
			available--
		}
		p.deleteReplica(r, fmt.Sprintf("replaced by revision %d", x.rev.Number))
	}
	// Retiring replicas still run (out of the name): they count against
	// maxSurge, so a deployment never runs more than it allows.
	total := len(x.fresh) + remaining + p.retiringCount(x.svc.Metadata.Name)
	var missing []int
	for i := 0; i < desired; i++ {
		if !freshAt[i] {
			missing = append(missing, i)
		}
	}
	sort.SliceStable(missing, func(i, j int) bool { return oldAt[missing[i]] < oldAt[missing[j]] })
	for _, i := range missing {
		if total >= desired+x.policy.Surge() {
			break
		}
		x.fresh = append(x.fresh, p.createReplica(x.rev, i))
		x.d.ProgressAt = p.now
		total++
	}
}

// fail marks the revision failed: its replicas that do not serve go, the
// old ones stay, and with autoRevert the service returns to the last
// revision that completed.
func (x *deployment) fail(why string) {
	p, name := x.p, x.svc.Metadata.Name
	x.d.State, x.d.Reason = api.DeployFailed, why
	x.rev.Failed = why
	setEntry(&p.mem.Revisions, &p.owns.revisions, RevisionKey(name, x.rev.Hash), x.rev)
	p.event(api.EventWarning, "DeploymentFailed", api.KindService, name, fmt.Sprintf("revision %d failed: %s", x.rev.Number, why))
	if stable, ok := p.mem.Revisions[RevisionKey(name, x.d.Stable)]; ok && x.policy.Reverts() {
		p.plan.Reverts = append(p.plan.Reverts, Revert{Service: name, Generation: x.svc.Metadata.Generation, To: stable,
			Failed: x.rev.Number, Reason: why})
	}
	x.keepFailed()
}

// keepFailed holds a failed deployment: where there is a last good
// revision, the failed one's replicas that do not serve go and every
// index keeps a replica of the good one; a first revision that failed
// keeps its replicas (their runner keeps restarting them).
func (x *deployment) keepFailed() {
	stable := x.stableOr()
	if stable.Hash != x.rev.Hash {
		for _, r := range x.fresh {
			if !x.availableNew(r) {
				x.p.deleteReplica(r, fmt.Sprintf("revision %d failed", x.rev.Number))
			}
		}
	}
	x.fillIndexes(stable)
}

// stableOr is the last good revision, or the current one when there is
// none.
func (x *deployment) stableOr() api.Revision {
	if st, ok := x.p.mem.Revisions[RevisionKey(x.svc.Metadata.Name, x.d.Stable)]; ok {
		return st
	}
	return x.rev
}

// fillAndCount is fillIndexes then count, of a complete deployment
// whose replicas are all of its revision, from the tally of them the
// step took as it sorted them (the usual pass of a service whose replicas
// changed: at 1,500 replicas, a walk each was a cache miss each).
func (x *deployment) fillAndCount(tally *freshTally) {
	x.d.Updated, x.d.Old, x.d.Available = tally.updated, 0, tally.available
	for i, ok := range tally.held {
		if !ok {
			r := x.p.createReplica(x.rev, i)
			x.fresh = append(x.fresh, r)
			x.d.Updated++
			if x.ready(r) {
				x.d.Available++
			} else {
				tally.unready[r.ID] = true
			}
		}
	}
}

// freshTally is what fillAndCount counts of a complete deployment's
// replicas of its revision: the indexes held, how many, how many ready.
type freshTally struct {
	held               []bool
	updated, available int
	// unready are the replicas not ready; whole: none is being deleted
	// (the step's tally holds for the next pass: deployTally).
	unready map[string]bool
	whole   bool
}

func (t *freshTally) add(x *deployment, r *api.Replica) {
	if x.p.deleting[r.ID] {
		t.whole = false
		return
	}
	if r.Index >= 0 && r.Index < len(t.held) {
		t.held[r.Index] = true
	}
	t.updated++
	if x.ready(r) {
		t.available++
	} else {
		t.unready[r.ID] = true
	}
}

// fillIndexes gives every index without a replica one of rev: scaling
// up, or a failed replica's place.
func (x *deployment) fillIndexes(rev api.Revision) {
	held := make([]bool, max(x.d.Desired, 0))
	for _, list := range [][]*api.Replica{x.fresh, x.old} {
		for _, r := range list {
			if r.Index >= 0 && r.Index < len(held) && !x.p.deleting[r.ID] {
				held[r.Index] = true
			}
		}
	}
	for i := 0; i < x.d.Desired; i++ {
		if !held[i] {
			r := x.p.createReplica(rev, i)
			if rev.Hash == x.rev.Hash {
				x.fresh = append(x.fresh, r)
			} else {
				x.old = append(x.old, r)
			}
		}
	}
}
