package controller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/decide"
	"github.com/gantry-dev/gantry/fleet"
	"github.com/gantry-dev/gantry/provider/registry"
	"github.com/gantry-dev/gantry/replica"
	"github.com/gantry-dev/gantry/spec"
	"github.com/gantry-dev/gantry/store"
)

// act carries a plan out: its store writes, launch intents first, then
// the provider calls, each in a worker. The writes of the replicas it
// makes and places commit in batches of PlacementBatch after the rest (a
// transaction as large as a fleet's growth conflicts with every
// heartbeat under PostgreSQL's serializable isolation and is retried
// whole); each is a step decided from the snapshot that stands alone, as
// kube-scheduler binds each Pod alone. A step whose object changed since
// the snapshot (a replica deleted, a machine gone) is skipped: the next
// pass decides again, also what a failed or interrupted batch left.
// It returns the objects of the feed it wrote (feedKey).
func (c *Controller) act(ctx context.Context, snap *decide.Snapshot, mem decide.Memory, plan decide.Plan) (map[string]bool, error) {
	put, del, err := decide.Diff(mem, plan.Memory)
	if err != nil {
		return nil, err
	}
	own := &ownWrites{Store: c.Store, names: map[string]bool{}}
	now := c.Clock.Now()
	var launched []*api.Machine
	err = own.Update(ctx, func(tx store.Tx) error {
		launched = nil
		w := &writer{tx: newReadBack(tx), now: now}
		steps := []func() error{
			func() error { return w.memory(put, del) },
			func() error { return w.removals(plan) },
			func() error { return w.machines(plan) },
			func() error {
				var err error
				launched, err = w.launches(plan.Launches)
				return err
			},
			func() error { return w.events(plan.Events) },
			func() error { return w.reverts(plan.Reverts) }, // after the event that says why
		}
		for _, step := range steps {
			if err := step(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return own.names, err
	}
	for _, t := range plan.Terminates {
		c.Metrics.Terminated(t.Cause)
	}
	c.dispatch(plan, launched, providerKeys(snap.Machines, launched))
	_, err = placeInBatches(ctx, own, placementSteps(plan), c.cfg.PlacementBatch, now)
	return own.names, err
}

// placeInBatches commits steps, batch of them at a time (all at once
// when batch is 0), in order; attempts counts the transactions run,
// retries included.
func placeInBatches(ctx context.Context, st store.Store, steps []placementStep, batch int, now time.Time) (attempts int, err error) {
	if batch <= 0 {
		batch = len(steps)
	}
	for from := 0; from < len(steps); from += batch {
		part := steps[from:min(from+batch, len(steps))]
		err := st.Update(ctx, func(tx store.Tx) error {
			attempts++
			w := &writer{tx: newReadBack(tx), now: now}
			for _, step := range part {
				if err := step(w); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return attempts, fmt.Errorf("place replicas %d-%d of %d: %w", from+1, from+len(part), len(steps), err)
		}
	}
	return attempts, nil
}

// placementStep is one replica's writes in a placement batch.
type placementStep func(w *writer) error

// placementSteps are the plan's evictions first (they free what the
// assignments take), then each replica it makes with its assignment, the
// assignments of replicas that exist by machine (a batch touches few
// machines, so few heartbeats meet it), and its pending reasons.
func placementSteps(plan decide.Plan) []placementStep {
	steps := make([]placementStep, 0, len(plan.Evictions)+len(plan.CreateReplicas)+len(plan.Assignments)+len(plan.Pending))
	for _, e := range plan.Evictions {
		steps = append(steps, func(w *writer) error { return w.evict(e) })
	}
	assignments := make(map[string]decide.Assignment, len(plan.Assignments))
	for _, a := range plan.Assignments {
		assignments[a.Replica] = a
	}
	for _, r := range plan.CreateReplicas {
		a, placed := assignments[r.ID]
		delete(assignments, r.ID)
		steps = append(steps, func(w *writer) error {
			if err := w.create(r); err != nil || !placed {
				return err
			}
			return w.assign(a)
		})
	}
	existing := make([]decide.Assignment, 0, len(assignments))
	for _, a := range plan.Assignments {
		if _, ok := assignments[a.Replica]; ok {
			existing = append(existing, a)
		}
	}
	sort.SliceStable(existing, func(i, j int) bool { return existing[i].Placement.Machine < existing[j].Placement.Machine })
	for _, a := range existing {
		steps = append(steps, func(w *writer) error { return w.assign(a) })
	}
	for _, id := range plan.PendingChanged { // by id; the others' replicas say so already
		steps = append(steps, func(w *writer) error { return w.pending(id, plan.Pending[id]) })
	}
	return steps
}

// providerKeys finds a machine's provider instance among machines (the
// view's, by id) and those launched: a map of every machine's, built for
// the few calls a pass makes, cost a large fleet's pass more than they.
func providerKeys(machines, launched []*api.Machine) func(id string) string {
	return func(id string) string {
		for _, m := range launched {
			if m.ID == id {
				return registry.KeyOf(m)
			}
		}
		if i, ok := slices.BinarySearchFunc(machines, id, func(m *api.Machine, id string) int { return strings.Compare(m.ID, id) }); ok {
			return registry.KeyOf(machines[i])
		}
		for _, m := range machines { // not by id after all
			if m.ID == id {
				return registry.KeyOf(m)
			}
		}
		return ""
	}
}

// dispatch hands the plan's provider calls to workers; keyOf says each
// machine's provider instance, whose calls share its workers.
func (c *Controller) dispatch(plan decide.Plan, launched []*api.Machine, keyOf func(id string) string) {
	for _, m := range launched {
		c.calls.Launch(m.ID, keyOf(m.ID))
	}
	for _, id := range plan.LaunchCalls {
		c.calls.Launch(id, keyOf(id))
	}
	diagnose := map[string]string{}
	for _, t := range plan.Terminates {
		if t.Diagnose {
			diagnose[t.Machine] = t.Reason
		}
	}
	for _, id := range plan.TerminateCalls {
		c.calls.Terminate(id, keyOf(id), diagnose[id])
	}
	for _, id := range plan.Describes {
		c.calls.Describe(id, keyOf(id))
	}
	for _, key := range plan.Lists {
		c.calls.List(key)
	}
	for _, f := range plan.Fences {
		c.calls.Fence(f, keyOf(f.Machine))
	}
	for _, o := range plan.Orphans {
		c.calls.TerminateOrphan(o)
	}
	for _, s := range plan.Starts {
		c.calls.WarmPool(decide.CallStart, s, keyOf(s.Machine))
	}
	for _, s := range plan.Stops {
		c.calls.WarmPool(decide.CallStop, s, keyOf(s.Machine))
	}
}

// writer applies a plan's steps in one transaction.
type writer struct {
	tx  store.Tx
	now time.Time
}

func (w *writer) record(typ, reason, kind, name, format string, args ...any) error {
	return store.Record(w.tx, w.now, typ, reason, kind, name, format, args...)
}

func (w *writer) memory(put map[string]string, del []string) error {
	keys := make([]string, 0, len(put))
	for k := range put {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := w.tx.PutMemory(k, put[k]); err != nil {
			return err
		}
	}
	for _, k := range del {
		if err := w.tx.DeleteMemory(k); err != nil {
			return err
		}
	}
	return nil
}

// skip tells a step whose object is gone (skipped) from a failure.
func skip(err error) (bool, error) {
	if errors.Is(err, store.ErrNotFound) {
		return true, nil
	}
	return err != nil, err
}

func (w *writer) create(r *api.Replica) error {
	if err := w.tx.PutReplica(r); err != nil {
		return err
	}
	return w.record(api.EventNormal, "Created", "Replica", r.ID, "replica %d of service %s", r.Index, r.Service)
}

// removals deletes, retires and ends the moves of the plan's replicas.
func (w *writer) removals(plan decide.Plan) error {
	for _, d := range plan.DeleteReplicas {
		if err := w.tx.DeleteReplica(d.ID); err != nil {
			return err
		}
		if err := w.record(api.EventNormal, "Removed", "Replica", d.ID, "%s", d.Reason); err != nil {
			return err
		}
	}
	for _, d := range plan.RetireReplicas {
		if err := w.retire(d); err != nil {
			return err
		}
	}
	for _, id := range plan.EndMoves {
		if err := w.endMove(id); err != nil {
			return err
		}
	}
	return nil
}

// endMove stops the drained old copy of a moved replica (its machine
// runs it no more).
func (w *writer) endMove(id string) error {
	r, err := w.tx.GetReplica(id)
	if done, err := skip(err); done || !replica.Draining(r) {
		return err
	}
	from := r.PreviousMachine
	replica.EndMove(r)
	if err := w.tx.PutReplica(r); err != nil {
		return err
	}
	return w.record(api.EventNormal, "Drained", "Replica", id, "the copy on %s drained and stops", from)
}

// retire takes a replica out of its service's name; it runs on until a
// later pass finds it drained and deletes it.
func (w *writer) retire(d decide.ReplicaDelete) error {
	r, err := w.tx.GetReplica(d.ID)
	if done, err := skip(err); done || !replica.Retire(r, d.Reason, w.now) {
		return err
	}
	if err := w.tx.PutReplica(r); err != nil {
		return err
	}
	return w.record(api.EventNormal, "Retiring", "Replica", d.ID, "out of service %s's name, stopping once drained: %s", d.Service, d.Reason)
}

// reverts return services whose deployment failed to their last good
// revision, unless the service changed since the pass read it (then the
// change is what deploys next).
func (w *writer) reverts(reverts []decide.Revert) error {
	for _, rv := range reverts {
		svc, err := w.tx.GetService(rv.Service)
		if done, err := skip(err); done {
			if err != nil {
				return err
			}
			continue
		}
		if svc.Metadata.Generation != rv.Generation {
			continue
		}
		svc.Spec = spec.WithTemplate(svc.Spec, rv.To.Spec)
		svc.Metadata.Generation++
		now := w.now.UTC()
		svc.Metadata.UpdatedAt = &now
		if err := w.tx.PutService(svc); err != nil {
			return err
		}
		if err := w.record(api.EventWarning, "DeploymentReverted", api.KindService, rv.Service,
			"revision %d failed (%s): returning to revision %d", rv.Failed, rv.Reason, rv.To.Number); err != nil {
			return err
		}
	}
	return nil
}

// change applies a transition to a machine and records its event (none
// when reason is empty). A transition refused, or with nothing to do,
// means the machine moved on since the snapshot: the step is skipped.
func (w *writer) change(id string, fn func(*api.Machine) (bool, error), typ, reason, format string, args ...any) (bool, error) {
	m, err := w.tx.GetMachine(id)
	if done, err := skip(err); done {
		return false, err
	}
	if changed, err := fn(m); err != nil || !changed {
		return false, nil
	}
	if err := w.tx.PutMachine(m); err != nil {
		return false, err
	}
	if reason == "" {
		return true, nil
	}
	return true, w.record(typ, reason, "Machine", id, format, args...)
}

func (w *writer) machines(plan decide.Plan) error {
	for _, s := range plan.Unreachable {
		if _, err := w.change(s.Machine, func(m *api.Machine) (bool, error) {
			return m.JoinState == api.JoinJoined && fleet.MarkUnreachable(m, s.Reason, w.now), nil
		}, api.EventWarning, "Unreachable", "%s", s.Reason); err != nil {
			return err
		}
	}
	for _, a := range plan.Adoptions {
		if _, err := w.change(a.Machine, func(m *api.Machine) (bool, error) {
			return m.ProviderID == "" && m.Live(), fleet.Launched(m, a.Instance, w.now)
		}, api.EventNormal, "Adopted", "found instance %s of an interrupted launch", a.Instance.ID); err != nil {
			return err
		}
	}
	for _, d := range plan.Drains {
		if _, err := w.change(d.Machine, func(m *api.Machine) (bool, error) { return fleet.Drain(m, d.Reason, d.Deadline, w.now) },
			api.EventNormal, "Draining", "%s (deadline %s)", d.Reason, d.Deadline.UTC().Format(time.RFC3339)); err != nil {
			return err
		}
	}
	for _, t := range plan.Terminates {
		if err := w.terminate(t); err != nil {
			return err
		}
	}
	return nil
}

// terminate marks a machine terminating and sends its replicas back to
// pending. A machine to diagnose gets its event from the worker that
// reads its console.
func (w *writer) terminate(t decide.Terminate) error {
	reason := "Terminating"
	if t.Diagnose {
		reason = ""
	}
	changed, err := w.change(t.Machine, func(m *api.Machine) (bool, error) { return fleet.Terminating(m, t.Reason, w.now) },
		api.EventNormal, reason, "%s", t.Reason)
	if err != nil || !changed {
		return err
	}
	return fleet.UnassignReplicas(w.tx, t.Machine, "machine "+t.Machine+" is terminating: "+t.Reason, w.now)
}

// launches records the launch intents.
func (w *writer) launches(launches []decide.Launch) ([]*api.Machine, error) {
	var out []*api.Machine
	for _, l := range launches {
		cl, err := w.tx.GetCluster(l.Cluster)
		if done, err := skip(err); done {
			if err != nil {
				return nil, err
			}
			continue
		}
		intent := fleet.Intent{Cluster: cl, Group: l.Group, InstanceType: l.InstanceType, Zone: l.Zone, CapacityType: l.CapacityType,
			PricePerHour: l.PricePerHour, ProviderKey: l.ProviderKey, Capacity: l.Capacity, TemplateHash: spec.TemplateHash(cl, l.Group), Replaces: l.Replaces}
		m, err := fleet.RecordIntent(w.tx, intent, w.now, fleet.NewMachineID)
		if errors.As(err, new(fleet.ErrSubnetsExhausted)) {
			continue // the planner's budget was stale; the next pass knows
		}
		if err != nil {
			return nil, err
		}
		if err := w.record(api.EventNormal, "Launching", "Machine", m.ID, "launching %s (%s, %s, $%.4f/h) in group %s/%s (subnet %s): %s",
			l.InstanceType, cmp.Or(l.Zone, "(none)"), l.CapacityType, l.PricePerHour, l.Cluster, l.Group, m.Subnet, l.Reason); err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// pending records why a replica waits, when that changed.
func (w *writer) pending(id, reason string) error {
	r, err := w.tx.GetReplica(id)
	if done, err := skip(err); done {
		return err
	}
	if !replica.SetPending(r, reason, w.now) {
		return nil
	}
	if err := w.tx.PutReplica(r); err != nil {
		return err
	}
	return w.record(api.EventWarning, "Pending", "Replica", id, "%s", reason)
}

func (w *writer) evict(e decide.Eviction) error {
	r, err := w.tx.GetReplica(e.Replica)
	if done, err := skip(err); done || r.Machine != e.Machine {
		return err
	}
	why := "preempted by higher-priority replica " + e.By
	replica.ToPending(r, why, w.now)
	if err := w.tx.PutReplica(r); err != nil {
		return err
	}
	return w.record(api.EventWarning, "Preempted", "Replica", r.ID, "%s on machine %s", why, e.Machine)
}

func (w *writer) assign(a decide.Assignment) error {
	r, err := w.tx.GetReplica(a.Replica)
	if done, err := skip(err); done {
		return err
	}
	msg, typ := "placed as Pod "+a.Placement.Pod, api.EventNormal
	if a.Placement.Pod == "" {
		// The machine is not read again: decide placed on it from the
		// snapshot, and only this leader terminates machines. Reading it
		// would make every heartbeat with news from it (which writes the
		// machine and reads its replicas) fail this transaction under
		// PostgreSQL's serializable isolation. A drain or cordon asked
		// for meanwhile is seen by the next pass, which moves what a
		// drain must, as kube-scheduler's binding does not check a
		// cordon either.
		msg = "placed on machine " + a.Placement.Machine
	}
	if r.Machine != a.From || replica.Assign(r, a.Placement, a.Moving(), w.now) != nil {
		return nil // the replica changed since the snapshot; the next pass decides again
	}
	if err := w.tx.PutReplica(r); err != nil {
		return err
	}
	if a.Moving() {
		msg = fmt.Sprintf("moving from %s to %s (new copy first)", a.From, a.Placement.Machine)
	}
	if a.Why != "" {
		msg += ": " + a.Why
	}
	if a.Placement.Note != "" {
		msg, typ = msg+": "+a.Placement.Note, api.EventWarning
	}
	return w.record(typ, "Scheduled", "Replica", r.ID, "%s", msg)
}

func (w *writer) events(events []decide.Event) error {
	for _, e := range events {
		if err := w.record(e.Type, e.Reason, e.ObjectKind, e.ObjectName, "%s", e.Message); err != nil {
			return err
		}
	}
	return nil
}
