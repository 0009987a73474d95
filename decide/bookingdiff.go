package decide

import (
	"fmt"
	"maps"
	"reflect"
	"slices"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/planner"
)

// Differs describes the first difference between two bookings ("":
// none): the decide harness checks that a booking made from the last one
// and what changed is the booking made afresh.
func (b *Booking) Differs(o *Booking) string {
	if b == nil || o == nil {
		if b != o {
			return fmt.Sprintf("one booking is missing (%v, %v)", b == nil, o == nil)
		}
		return ""
	}
	if len(b.machines) != len(o.machines) || len(b.ids) != len(b.machines) || len(o.ids) != len(o.machines) ||
		len(b.lists) != len(b.machines) || len(o.lists) != len(o.machines) {
		return fmt.Sprintf("%d machines booked (%d ids, %d lists), %d afresh (%d ids, %d lists)", len(b.machines), len(b.ids), len(b.lists),
			len(o.machines), len(o.ids), len(o.lists))
	}
	for i := range b.machines {
		x, y := b.machines[i], o.machines[i]
		if b.ids[i] != x.pm.ID || o.ids[i] != y.pm.ID {
			return fmt.Sprintf("machine %s listed as %s booked, %s afresh", x.pm.ID, b.ids[i], o.ids[i])
		}
		if b.lists[i] != x.list || o.lists[i] != y.list {
			return fmt.Sprintf("machine %s: on list %d, its entry on %d (afresh %d, %d)", x.pm.ID, b.lists[i], x.list, o.lists[i], y.list)
		}
		xpm, ypm := x.pm, y.pm
		xpm.Machine, ypm.Machine = nil, nil
		if !reflect.DeepEqual(xpm, ypm) || !x.pm.Machine.Equal(y.pm.Machine) || x.list != y.list || !slices.Equal(replicaIDs(x.replicas), replicaIDs(y.replicas)) {
			return fmt.Sprintf("machine %s: booked %+v %+v with %v, afresh %+v %+v with %v", x.pm.ID, x.pm, *x.pm.Machine, replicaIDs(x.replicas), y.pm, *y.pm.Machine, replicaIDs(y.replicas))
		}
	}
	for _, booking := range []*Booking{b, o} {
		if why := booking.asksUncounted(); why != "" {
			return why
		}
		if why := booking.roomsDiffer(); why != "" {
			return why
		}
	}
	if !maps.EqualFunc(b.elsewhere, o.elsewhere, func(x, y []*api.Replica) bool { return slices.Equal(replicaIDs(x), replicaIDs(y)) }) {
		return fmt.Sprintf("replicas outside the view: %d machines, afresh %d", len(b.elsewhere), len(o.elsewhere))
	}
	if !maps.Equal(b.own, o.own) {
		return fmt.Sprintf("own copies %v, afresh %v", b.own, o.own)
	}
	if !reflect.DeepEqual(b.census.read(), o.census.read()) {
		return fmt.Sprintf("machines counted %+v, afresh %+v", b.census.read(), o.census.read())
	}
	if !b.skeleton.readAs(o.skeleton) {
		return fmt.Sprintf("the view read its machines as %+v, afresh %+v", b.skeleton.read(), o.skeleton.read())
	}
	return ""
}

func replicaIDs(list []*api.Replica) []string {
	ids := make([]string, len(list))
	for i, r := range list {
		ids[i] = r.ID
	}
	return ids
}

// roomsDiffer names a machine whose room, as the booking keeps it, is not
// its machine's ("": none).
func (b *Booking) roomsDiffer() string {
	if len(b.rooms) != len(b.machines) {
		return fmt.Sprintf("%d rooms for %d machines", len(b.rooms), len(b.machines))
	}
	for i, m := range b.machines {
		if room := m.pm.Machine.Room(); b.rooms[i] != room {
			return fmt.Sprintf("machine %s: its room kept as %+v, its machine's %+v", m.pm.ID, b.rooms[i], room)
		}
	}
	return ""
}

// ViewUnshared names a machine of the pass's view (when it kept it for
// the next pass) that is neither the booking's nor a copy the pass made
// ("": none): the pass read the rooms of the others from the booking's.
// The decide harness asks right after each pass, before it clears the
// scratch the view is in.
func (b *Booking) ViewUnshared() string {
	if b == nil || b.view == nil {
		return ""
	}
	v := b.view
	for i := range min(len(v.byID), len(b.machines)) {
		if (v.owned == nil || !v.owned[i]) && v.byID[i].Machine != b.machines[i].pm.Machine {
			return fmt.Sprintf("machine %s: neither the booking's nor a copy the pass made", b.ids[i])
		}
	}
	return ""
}

// SumsDiffer says how the sums the pass could hand the planner from its
// skeleton (machineSums) differ from those a walk of its booked machines
// finds, which the planner would read ("": they do not). The decide
// harness asks after each pass.
func (b *Booking) SumsDiffer() string {
	if b == nil || b.skeleton == nil || len(b.skeleton.entries) != len(b.machines) {
		return ""
	}
	walked := planner.MachineSums{}
	for i := range b.machines {
		pm := &b.machines[i].pm
		walked.PricePerHour += pm.PricePerHour
		if !pm.Joined {
			if walked.Unjoined == nil {
				walked.Unjoined = map[string]bool{}
			}
			walked.Unjoined[pm.Cluster] = true
		}
	}
	if sums := b.skeleton.machineSums(); sums.PricePerHour != walked.PricePerHour || !maps.Equal(sums.Unjoined, walked.Unjoined) {
		return fmt.Sprintf("the skeleton sums the machines' prices to %v with clusters %v not joined; the booked machines to %v with %v",
			sums.PricePerHour, sums.Unjoined, walked.PricePerHour, walked.Unjoined)
	}
	return ""
}

// asksUncounted names a machine whose asks, kept for consolidation's
// what-ifs, do not count one of its replicas ("": none).
func (b *Booking) asksUncounted() string {
	for i := range b.machines {
		pm := &b.machines[i].pm
		if !pm.AsksKnown {
			continue
		}
		for j := range pm.Replicas {
			if !pm.Asks.Counts(&pm.Replicas[j]) {
				return fmt.Sprintf("machine %s: its asks do not count replica %s", pm.ID, pm.Replicas[j].ID)
			}
		}
	}
	return ""
}
