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

// beatenMachines are the machines the last sync handed out (out), made
// from the view's (from); both by id.
type beatenMachines struct{ from, out []*api.Machine }

// with is machines with the later of their own heartbeat and the
// recorded one: the machine itself when its own is the later, else a
// copy, the last sync's when it was made from the same machine and beat.
// When machines is the list the last sync had and not all heartbeats
// must be looked at, only the changed machines' are.
func (b *beatenMachines) with(machines []*api.Machine, beats map[string]time.Time, changed []string, all bool) []*api.Machine {
	if len(machines) == 0 {
		*b = beatenMachines{}
		return nil
	}
	if !all && sameList(machines, b.from) {
		for _, id := range changed {
			if i, ok := slices.BinarySearchFunc(machines, id, func(m *api.Machine, id string) int { return strings.Compare(m.ID, id) }); ok {
				b.out[i] = beaten(machines[i], beats)
			}
		}
		return slices.Clone(b.out) // readers may set elements (Beats.Overlay)
	}
	out := make([]*api.Machine, len(machines))
	j := 0
	for i, m := range machines {
		at, later := recordedLater(m, beats)
		if !later {
			out[i] = m
			continue
		}
		for j < len(b.from) && b.from[j].ID < m.ID {
			j++
		}
		if j < len(b.from) && b.from[j] == m && b.out[j] != m && b.out[j].LastHeartbeat.Equal(at) {
			out[i] = b.out[j]
			continue
		}
		out[i] = m.WithHeartbeat(at)
	}
	*b = beatenMachines{from: machines, out: out}
	return slices.Clone(out) // readers may set elements (Beats.Overlay)
}

// beaten is m with the later of its own heartbeat and the recorded one.
func beaten(m *api.Machine, beats map[string]time.Time) *api.Machine {
	if at, ok := beats[m.ID]; ok {
		return m.WithHeartbeat(at)
	}
	return m
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
