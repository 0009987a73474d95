package decide

import (
	"slices"

	"github.com/gantry-dev/gantry/api"
)

// vouchedDraining are the ids the snapshot lists for each machine
// draining now (Snapshot.Draining); false when it lists none, or not for
// a machine the pass itself drained.
func (p *Pass) vouchedDraining() (map[string][]string, bool) {
	if p.snap.Draining == nil {
		return nil, false
	}
	out := map[string][]string{}
	for _, m := range p.drainingCandidates() {
		if m.FleetState != api.FleetDraining {
			continue
		}
		ids, ok := p.snap.Draining[m.ID]
		if !ok {
			return nil, false
		}
		out[m.ID] = ids
	}
	return out, true
}

// drainingHolds counts, for every draining machine, the replicas on it
// and the copies moving off it (retiring ones too), as a walk of every
// replica does (eachHeld), among those the snapshot lists for it and
// those the pass changed; false when the snapshot does not vouch for
// every draining machine.
func (p *Pass) drainingHolds() (map[string]int, bool) {
	listed, ok := p.vouchedDraining()
	if !ok {
		return nil, false
	}
	counts := make(map[string]int, len(listed))
	for m := range listed {
		counts[m] = 0
	}
	seen := map[string]bool{}
	count := func(r *api.Replica) {
		if seen[r.ID] {
			return
		}
		seen[r.ID] = true
		for _, m := range []string{r.Machine, r.PreviousMachine} {
			if _, draining := counts[m]; draining && m != "" {
				counts[m]++
			}
		}
	}
	for _, ids := range listed {
		for _, id := range ids {
			if r := p.runningReplica(id); r != nil {
				count(r)
			}
		}
	}
	for r := range p.mine {
		if p.replica(r.ID) == r {
			count(r)
		}
	}
	return counts, true
}

// drainingIDs are the ids the snapshot lists for the draining machines,
// sorted; false as for vouchedDraining.
func (p *Pass) drainingIDs() ([]string, bool) {
	listed, ok := p.vouchedDraining()
	if !ok {
		return nil, false
	}
	var ids []string
	for _, list := range listed {
		ids = append(ids, list...)
	}
	slices.Sort(ids)
	return slices.Compact(ids), true
}
