package view

import (
	"slices"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/store"
)

// beatTable is the recorded heartbeats by machine, kept from sync to
// sync. Heartbeats are not in the feed, but their writes are marked in
// commit order (store.Tx.ScanLiveness): a sync reads only the rows
// written since the newest mark it saw and names their machines, so
// that only those machines' copies are remade (not 50,000 rows read and
// every machine looked at each sync).
type beatTable struct {
	at map[string]time.Time
	// mark is the newest mark read; whole that the table holds every row
	// up to it (false: the next sync reads them all and looks at every
	// machine: the first, and after a read that failed midway, whose
	// rows were taken in but not named).
	mark  int64
	whole bool
}

// read brings the table to tx's heartbeats, and returns the machines
// whose heartbeat changed, or all when every machine must be looked at.
func (t *beatTable) read(tx store.Tx) (changed []string, all bool, err error) {
	if !t.whole {
		return nil, true, t.readWhole(tx)
	}
	newest := t.mark
	err = tx.ScanLiveness(t.mark, func(id string, at time.Time, mark int64) {
		newest = max(newest, mark)
		if was, ok := t.at[id]; !ok || !was.Equal(at) {
			t.at[id] = at
			changed = append(changed, id)
		}
	})
	if err != nil {
		t.whole = false
		return nil, true, err
	}
	t.mark = newest
	return changed, false, nil
}

// readWhole reads every recorded heartbeat afresh.
func (t *beatTable) readWhole(tx store.Tx) error {
	fresh := make(map[string]time.Time, len(t.at))
	var newest int64
	err := tx.ScanLiveness(store.AllLiveness, func(id string, at time.Time, mark int64) {
		fresh[id] = at
		newest = max(newest, mark)
	})
	if err != nil {
		return err
	}
	t.at, t.mark, t.whole = fresh, newest, true
	return nil
}

// alignedBeats are the recorded heartbeats later than the machines'
// own, aligned with the machine list the last sync handed out (from):
// beats[i], in Unix nanoseconds, is from[i]'s (0: none). The machines are
// not copied to carry them: 5,000 heartbeats a second made 3.4 MB of
// copies a pass for the collector.
type alignedBeats struct {
	from  []*api.Machine
	beats []int64
}

// of is machines' recorded heartbeats, aligned with them (nil when none
// is later than its machine's own). When machines is the list the last
// sync had and not all heartbeats must be looked at, only the changed
// machines' are. The slice is the caller's.
func (a *alignedBeats) of(machines []*api.Machine, recorded map[string]time.Time, changed []string, all bool) []int64 {
	if all || !sameList(machines, a.from) || a.beats == nil {
		a.from, a.beats = machines, nil
		for i, m := range machines {
			if at, later := recordedLater(m, recorded); later {
				a.set(i, at)
			}
		}
		return slices.Clone(a.beats)
	}
	for _, id := range changed {
		if i, ok := slices.BinarySearchFunc(machines, id, func(m *api.Machine, id string) int { return strings.Compare(m.ID, id) }); ok {
			if at, later := recordedLater(machines[i], recorded); later {
				a.set(i, at)
			} else if a.beats != nil {
				a.beats[i] = 0
			}
		}
	}
	return slices.Clone(a.beats)
}

func (a *alignedBeats) set(i int, at time.Time) {
	if a.beats == nil {
		a.beats = make([]int64, len(a.from))
	}
	a.beats[i] = at.UnixNano()
}

// recordedLater is m's recorded heartbeat, and whether it is later than
// its own.
func recordedLater(m *api.Machine, beats map[string]time.Time) (time.Time, bool) {
	at, ok := beats[m.ID]
	return at, ok && (m.LastHeartbeat == nil || at.After(*m.LastHeartbeat))
}

// sameList: a and b are the same list (the view's lists are never
// changed in place).
func sameList(a, b []*api.Machine) bool {
	return len(a) == len(b) && len(a) > 0 && &a[0] == &b[0]
}

// WithHeartbeats are the snapshot's machines each carrying its latest
// heartbeat, as ListMachines reports them: a machine with a later
// recorded heartbeat than its own is a copy that carries it.
func (s Snapshot) WithHeartbeats() []*api.Machine {
	out := slices.Clone(s.Machines)
	for i, at := range s.Heartbeats {
		if at != 0 {
			out[i] = out[i].WithHeartbeat(time.Unix(0, at).UTC())
		}
	}
	return out
}
