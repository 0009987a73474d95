package decide

import (
	"maps"
	"reflect"
	"time"

	"github.com/gantry-dev/gantry/api"
)

// Wake is what a pass that decided nothing needs to see before a pass
// with the same inputs could decide something: the earliest deadline of
// its rules, and the heartbeats it read beyond liveness. Passes are
// incremental through it: while the store, the observations and these
// stay as they were, the next pass would decide nothing either, and the
// controller skips it.
type Wake struct {
	// At is the earliest time a deadline a rule compared with passes
	// (zero: none). Silence is not in it: it moves with every heartbeat,
	// so SilentAt computes it from the heartbeats of the time.
	At time.Time
	// Heartbeats are the heartbeats a decision read beyond liveness (a
	// failover lease renewed from its holder's machine), by machine.
	Heartbeats map[string]time.Time
}

func (w *Wake) at(t time.Time) {
	if w.At.IsZero() || t.Before(w.At) {
		w.At = t
	}
}

// reached reports whether now is at or after t; if not, the pass wakes
// at t.
func (p *Pass) reached(t time.Time) bool {
	if p.now.Before(t) {
		p.plan.Wake.at(t)
		return false
	}
	return true
}

// passed reports whether now is after t; if not, the pass wakes just
// after t.
func (p *Pass) passed(t time.Time) bool {
	if !p.now.After(t) {
		p.plan.Wake.at(t.Add(time.Nanosecond))
		return false
	}
	return true
}

// readHeartbeat notes that a decision read the heartbeat of a machine
// (p.machines[i]).
func (p *Pass) readHeartbeat(i int, m *api.Machine) {
	if p.plan.Wake.Heartbeats == nil {
		p.plan.Wake.Heartbeats = map[string]time.Time{}
	}
	p.plan.Wake.Heartbeats[m.ID] = p.snap.heartbeat(i, m)
}

// Idle reports whether a plan asks for nothing: no store write, no
// provider call, no event, and the memory (before) it began with.
func (p Plan) Idle(snap *Snapshot, before Memory) bool {
	if p.Acts() || len(p.Describes)+len(p.Lists)+len(p.Events) > 0 {
		return false
	}
	if put, del, err := Diff(before, p.Memory); err != nil || len(put)+len(del) > 0 {
		return false
	}
	return !pendingChanges(snap, p.Pending, p.PendingChanged)
}

// pendingChanges reports whether a pending reason differs from what its
// replica says (the act step would write it). Only the reasons the pass
// named to write (changed) may: the others' replicas said so as the pass
// held them.
func pendingChanges(snap *Snapshot, pending map[string]string, changed []string) bool {
	if len(changed) == 0 {
		return false
	}
	named := make(map[string]bool, len(changed))
	for _, id := range changed {
		named[id] = true
	}
	differs := func(r *api.Replica) bool {
		why, ok := pending[r.ID]
		return ok && named[r.ID] && (r.Machine == "" && r.Pod == "") && (r.State != api.ReplicaPending || r.Reason != why)
	}
	if snap.InStoreOrder { // found by binary search, not a walk of every replica
		for _, id := range changed {
			if r := searchByID(snap.AllReplicas(), id); r != nil && differs(r) {
				return true
			}
		}
		return false
	}
	for r := range snap.AllReplicas().All {
		if differs(r) {
			return true
		}
	}
	return false
}

// SilentAt is the earliest time a machine that heartbeats falls silent
// for long enough to be marked unreachable, from the snapshot's
// heartbeats (zero: no such machine). It is detectLost's rule.
func SilentAt(cfg Config, snap *Snapshot) time.Time {
	live := 0
	for _, m := range snap.Machines {
		if m.Live() {
			live++
		}
	}
	limit := cfg.HeartbeatIntervalFor(live) * time.Duration(cfg.MissedHeartbeats)
	var first time.Time
	for i, m := range snap.Machines {
		if !watchedForSilence(m) || m.UnreachableSince != nil {
			continue
		}
		at := lastSign(snap.heartbeat(i, m), snap.LivenessSince).Add(limit + time.Nanosecond)
		if first.IsZero() || at.Before(first) {
			first = at
		}
	}
	return first
}

// watchedForSilence: a joined machine whose heartbeats count.
func watchedForSilence(m *api.Machine) bool {
	if m.JoinState != api.JoinJoined {
		return false
	}
	switch m.FleetState {
	case api.FleetReady, api.FleetActive, api.FleetDraining:
		return true
	}
	return false
}

// lastSign is a machine's last heartbeat (zero: none), but never before
// the server recorded heartbeats reliably.
func lastSign(heard, since time.Time) time.Time {
	if heard.After(since) {
		return heard
	}
	return since
}

// Asleep reports whether a pass at now may be skipped: the last pass
// (whose plan was last) decided nothing, its inputs other than
// heartbeats are unchanged (the caller knows that: the store's revision
// and the observations), no deadline it reported has come, no machine
// has fallen silent, and the heartbeats it read are as they were.
func Asleep(cfg Config, last Plan, snap *Snapshot, now time.Time) bool {
	if !last.Wake.At.IsZero() && !now.Before(last.Wake.At) {
		return false
	}
	if silent := SilentAt(cfg, snap); !silent.IsZero() && !now.Before(silent) {
		return false
	}
	if len(last.Wake.Heartbeats) == 0 {
		return true
	}
	seen := map[string]time.Time{}
	for i, m := range snap.Machines {
		if _, ok := last.Wake.Heartbeats[m.ID]; ok {
			seen[m.ID] = snap.heartbeat(i, m)
		}
	}
	return maps.EqualFunc(seen, last.Wake.Heartbeats, time.Time.Equal)
}

// Observations is the snapshot's observations of the world outside the
// store (what SameObservations compares), without its objects.
func (s *Snapshot) Observations() *Snapshot {
	return &Snapshot{Catalogs: s.Catalogs, Providers: s.Providers, Instances: s.Instances, Inventories: s.Inventories,
		ListedAt: s.ListedAt, InFlight: s.InFlight, Kubernetes: s.Kubernetes, SecretRevisions: s.SecretRevisions, LivenessSince: s.LivenessSince}
}

// SameObservations reports whether two snapshots hold the same
// observations of the world outside the store: catalogs, providers,
// instances, listings, calls in flight, Kubernetes watches, secrets and
// when heartbeats began to count. A fresh inventory is never the same:
// each is judged once.
func SameObservations(a, b *Snapshot) bool {
	if len(a.Inventories) > 0 || len(b.Inventories) > 0 {
		return false
	}
	return a.LivenessSince.Equal(b.LivenessSince) && maps.Equal(a.InFlight, b.InFlight) &&
		maps.Equal(a.SecretRevisions, b.SecretRevisions) && maps.EqualFunc(a.ListedAt, b.ListedAt, time.Time.Equal) &&
		maps.Equal(a.Instances, b.Instances) && reflect.DeepEqual(a.Catalogs, b.Catalogs) &&
		reflect.DeepEqual(a.Providers, b.Providers) && reflect.DeepEqual(a.Kubernetes, b.Kubernetes)
}
