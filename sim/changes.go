package sim

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/decide"
	"github.com/gantry-dev/gantry/decide/playback"
	"github.com/gantry-dev/gantry/internal/sortedset"
)

// changes notes what changed in the simulated store since the last pass,
// as a server's view logs it from the change feed, so that a pass books
// only the machines the changes touched (decide.Snapshot.Booked and
// Changed) instead of every one: every write the run makes goes through
// it. A run with verify set decides every pass both ways and fails when
// they differ, as the decision harness does.
type changes struct {
	c *decide.Changes
	// ending are the machines the cloud ended (terminated, or refused
	// their launch), which applying the next plan drops from the store.
	ending map[string]bool
}

func newChanges() *changes { return &changes{c: decide.NewChanges(), ending: map[string]bool{}} }

// ended notes a machine the cloud ended: changed now, and again when it
// leaves the store.
func (ch *changes) ended(id string) {
	ch.machine(id)
	ch.ending[id] = true
}

// take hands the changes noted to a pass and starts anew.
func (ch *changes) take() *decide.Changes {
	c := ch.c
	ch.c = decide.NewChanges()
	return c
}

func (ch *changes) replica(r *api.Replica) { ch.c.Replica(r.ID, r.Service, r.Machine) }
func (ch *changes) machine(id string)      { ch.c.Machines[id] = true }
func (ch *changes) service(name string)    { ch.c.Services[name] = true }
func (ch *changes) memory(key string)      { ch.c.Memory[key] = true }

// beforeApply notes, as they are, the replicas and machines a plan is
// about to change, and returns the machines there were when verify asks
// (afterApply checks its notes against them).
func (ch *changes) beforeApply(w *playback.World, plan decide.Plan, verify bool) []*api.Machine {
	for _, list := range [][]decide.ReplicaDelete{plan.DeleteReplicas, plan.RetireReplicas} {
		for _, d := range list {
			ch.c.Replica(d.ID, d.Service, machineOf(w, d.ID))
		}
	}
	for _, id := range plan.EndMoves {
		ch.noteReplica(w, id)
	}
	for _, e := range plan.Evictions {
		ch.noteReplica(w, e.Replica)
	}
	for _, a := range plan.Assignments {
		ch.noteReplica(w, a.Replica)
	}
	for _, id := range plan.PendingChanged {
		// A reason the replica already has is no write (the act step
		// writes the ones that differ).
		if r := w.ReplicaByID(id); r != nil && (r.State != api.ReplicaPending || r.Reason != plan.Pending[id]) {
			ch.replica(r)
		}
	}
	for _, r := range plan.CreateReplicas {
		ch.c.Replica(r.ID, r.Service, "")
	}
	for _, rv := range plan.Reverts {
		ch.service(rv.Service)
	}
	for _, t := range plan.Terminates {
		for _, r := range w.ReplicasOnOrOff(t.Machine) {
			ch.replica(r)
		}
	}
	for _, steps := range [][]decide.MachineStep{plan.Unreachable, plan.Stops, plan.Starts} {
		for _, s := range steps {
			ch.machine(s.Machine)
		}
	}
	for _, a := range plan.Adoptions {
		ch.machine(a.Machine)
	}
	for _, d := range plan.Drains {
		ch.machine(d.Machine)
	}
	for _, t := range plan.Terminates {
		ch.machine(t.Machine)
	}
	for _, ids := range [][]string{plan.LaunchCalls, plan.TerminateCalls} {
		for _, id := range ids {
			ch.machine(id)
		}
	}
	if !verify {
		return nil
	}
	return slices.Clone(w.Snap.Machines)
}

// afterApply notes the machines a plan made, which applying it appends
// to the snapshot's, and those it dropped, which ended: by its own calls
// (beforeApply noted those), or by the cloud since (ending). With before
// (verify), it fails if the machines made or dropped are not all noted.
func (ch *changes) afterApply(w *playback.World, plan decide.Plan, before []*api.Machine, memBefore, memAfter decide.Memory) error {
	for _, m := range w.Snap.Machines[len(w.Snap.Machines)-len(plan.Launches):] {
		ch.machine(m.ID)
	}
	maps.DeleteFunc(ch.ending, func(id string, _ bool) bool {
		if w.MachineByID(id) != nil {
			return false
		}
		ch.machine(id)
		return true
	})
	if before != nil {
		if err := ch.notedEveryMachine(before, w.Snap.Machines); err != nil {
			return err
		}
	}
	decide.ChangedKeys(memBefore, memAfter, ch.memory)
	return nil
}

// notedEveryMachine fails if a machine that was in before or is in
// after, not both, is not noted as changed.
func (ch *changes) notedEveryMachine(before, after []*api.Machine) error {
	was := make(map[string]bool, len(before))
	for _, m := range before {
		was[m.ID] = true
	}
	for _, m := range after {
		if !was[m.ID] && !ch.c.Machines[m.ID] {
			return fmt.Errorf("machine %s was made, but not noted", m.ID)
		}
		delete(was, m.ID)
	}
	for id := range was {
		if !ch.c.Machines[id] {
			return fmt.Errorf("machine %s left the store, but was not noted", id)
		}
	}
	return nil
}

func (ch *changes) noteReplica(w *playback.World, id string) {
	if r := w.ReplicaByID(id); r != nil {
		ch.replica(r)
	}
}

func machineOf(w *playback.World, id string) string {
	if r := w.ReplicaByID(id); r != nil {
		return r.Machine
	}
	return ""
}

// inStoreOrder puts the snapshot's replicas and machines in the store's
// order (replicas by service and id, machines by id), which the run
// vouches for: a pass then neither checks nor indexes them afresh. Only
// a plan's new replicas and machines, appended, break the order: made
// says at most how many of each are at the lists' ends.
func inStoreOrder(s *decide.Snapshot, made appended) {
	s.Replicas = mergeAppended(s.Replicas, made.replicas, byServiceAndID)
	s.Machines = mergeAppended(s.Machines, made.machines, byMachineID)
	s.InStoreOrder, s.MachinesByID = true, true
}

// appended counts the replicas and machines plans appended to the
// snapshot's lists since they were last put in order.
type appended struct{ replicas, machines int }

func (a *appended) add(plan decide.Plan) {
	a.replicas += len(plan.CreateReplicas)
	a.machines += len(plan.Launches)
}

// mergeAppended sorts list, sorted but for at most its last n items, as
// a stable sort would: those sorted, then merged in from the back, each
// where a binary search of the sorted part puts it (after the items
// equal to it), the items past it moved up in one copy. A sort of the
// whole list read each of 15,000 replicas' ids again, a cache miss each;
// a merge that compared each item it moved past read up to 60,000.
func mergeAppended[T any](list []T, n int, cmp func(a, b T) int) []T {
	sorted := max(len(list)-n, 0)
	if sorted == len(list) {
		return list
	}
	slices.SortStableFunc(list[sorted:], cmp)
	if sorted == 0 || cmp(list[sorted-1], list[sorted]) <= 0 {
		return list
	}
	tail := slices.Clone(list[sorted:])
	end := len(list) // list[end:] is merged
	from := sorted   // list[:from] is the sorted part not yet moved
	for j := len(tail) - 1; j >= 0; j-- {
		at := sort.Search(from, func(i int) bool { return cmp(list[i], tail[j]) > 0 })
		moved := from - at
		copy(list[end-moved:end], list[at:from])
		end -= moved
		from = at
		end--
		list[end] = tail[j]
	}
	return list
}

func byServiceAndID(a, b *api.Replica) int {
	return cmp.Or(strings.Compare(a.Service, b.Service), strings.Compare(a.ID, b.ID))
}

func byMachineID(a, b *api.Machine) int { return strings.Compare(a.ID, b.ID) }

// tally keeps, as a server's view does, the replicas on no machine, those
// retiring or moving off a machine, and those on each machine, from the
// replicas each pass's changes name: a pass then looks for replicas to
// place among the unplaced (Snapshot.Unplaced), for what draining
// machines hold among theirs (Snapshot.Draining), and finds the retiring
// and moving ones among theirs (Snapshot.Retiring, Snapshot.Moving).
type tally struct {
	unplaced, moving, retiring *sortedset.Set
	// held are the replicas on each machine or moving off it, by
	// machine; counted is how each replica was counted: in which sets, on
	// which machines (one lookup a changed replica, not one a set).
	held    map[string]map[string]bool
	counted map[string]countedAs
	// draining are the machines draining, kept from the changed machines
	// (every machine at first: drainsKnown).
	draining    map[string]bool
	drainsKnown bool
}

// countedAs is how the tally counted a replica: in which of its sets,
// and on which machines (the one it is on, the one it moves off).
type countedAs struct {
	unplaced, retiring, moving bool
	on                         [2]string
}

func newTally() *tally {
	return &tally{unplaced: sortedset.New(), retiring: sortedset.New(), moving: sortedset.New(),
		held: map[string]map[string]bool{}, counted: map[string]countedAs{}, draining: map[string]bool{}}
}

// drains notes again whether the changed machines drain (at first,
// every machine).
func (t *tally) drains(w *playback.World, machines map[string]bool) {
	if !t.drainsKnown || machines == nil {
		t.drainsKnown = true
		clear(t.draining)
		for _, m := range w.Snap.Machines {
			if m.FleetState == api.FleetDraining {
				t.draining[m.ID] = true
			}
		}
		return
	}
	for id := range machines {
		if m := w.MachineByID(id); m != nil && m.FleetState == api.FleetDraining {
			t.draining[id] = true
		} else {
			delete(t.draining, id)
		}
	}
}

// update counts the changed replicas again as they are now (gone: not at
// all).
func (t *tally) update(w *playback.World, changed map[string]decide.ReplicaWas) {
	for id := range changed {
		var now countedAs
		if r := w.ReplicaByID(id); r != nil {
			now = countedAs{unplaced: r.Machine == "", retiring: r.RetiringSince != nil, moving: r.PreviousMachine != "",
				on: [2]string{r.Machine, r.PreviousMachine}}
		}
		was := t.counted[id]
		if was == now { // most changes are of a replica's state alone
			continue
		}
		for _, set := range []struct {
			s        *sortedset.Set
			was, now bool
		}{{t.unplaced, was.unplaced, now.unplaced}, {t.retiring, was.retiring, now.retiring}, {t.moving, was.moving, now.moving}} {
			switch {
			case set.now && !set.was:
				set.s.Add(id)
			case set.was && !set.now:
				set.s.Remove(id)
			}
		}
		if was.on != now.on {
			t.hold(id, was.on, false)
			t.hold(id, now.on, true)
		}
		if now == (countedAs{}) {
			delete(t.counted, id)
		} else {
			t.counted[id] = now
		}
	}
}

// hold counts the replica of id on the machines on, or stops counting it
// there.
func (t *tally) hold(id string, on [2]string, held bool) {
	for _, m := range on {
		if m == "" {
			continue
		}
		if !held {
			if set := t.held[m]; set != nil {
				delete(set, id)
				if len(set) == 0 {
					delete(t.held, m)
				}
			}
			continue
		}
		if t.held[m] == nil {
			t.held[m] = map[string]bool{}
		}
		t.held[m][id] = true
	}
}

// onOrOff are the replicas on the machine or moving off it now, in no
// particular order: among those the tally holds there and those changed
// since it was brought up to date (a walk of every replica for each
// machine lost was quadratic in a large fleet's churn). The run hands it
// to its world (World.OnOrOff), through which it asks.
func (t *tally) onOrOff(w *playback.World, since *decide.Changes, machine string) []*api.Replica {
	var out []*api.Replica
	seen := make(map[string]bool, len(t.held[machine]))
	take := func(id string) {
		if seen[id] {
			return
		}
		seen[id] = true
		if r := w.ReplicaByID(id); r != nil && (r.Machine == machine || r.PreviousMachine == machine) {
			out = append(out, r)
		}
	}
	for id := range t.held[machine] {
		take(id)
	}
	for id := range since.Replicas {
		take(id)
	}
	return out
}

// vouch hands the tally to a pass.
func (t *tally) vouch(s *decide.Snapshot) {
	s.Draining = make(map[string][]string, len(t.draining))
	for id := range t.draining {
		s.Draining[id] = slices.Sorted(maps.Keys(t.held[id]))
	}
	s.Unplaced = t.unplaced.Sorted() // never nil: nil reads as not known
	s.Retiring, s.Moving = t.retiring.Sorted(), t.moving.Sorted()
	// A run deletes no service, and its passes make replicas only of the
	// services there are: no replica is orphaned.
	s.Orphaned = []string{}
}
