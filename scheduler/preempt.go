package scheduler

import "sort"

// preempt finds the machine where evicting the fewest lower-priority
// residents (lowest priority first) makes room for r, evicts them, and
// returns the machine. Ties: fewer victims, then lower top victim
// priority, then placement order.
func (st *state) preempt(eligible []*Machine, tiers []tier, r *Replica, res *Result) (*Machine, []int, tier, bool) {
	t := tiers[0]
	var best *Machine
	var bestVictims []Resident
	bestTop := 0
	for _, m := range eligible {
		victims, ok := victimsFor(m, r, t.withGPU)
		if !ok || len(victims) == 0 {
			continue
		}
		top := victims[len(victims)-1].Priority
		if best == nil || len(victims) < len(bestVictims) || (len(victims) == len(bestVictims) && top < bestTop) {
			best, bestVictims, bestTop = m, victims, top
		}
	}
	if best == nil {
		return nil, nil, tier{}, false
	}
	st.explained = nil // the victims' room frees
	for _, v := range bestVictims {
		Unassign(best, *v.Replica, v.GPUs)
		best.Residents = removeResident(best.Residents, v.Replica.ID)
		best.PlainResidents = 0 // the residents after the one removed moved up
		res.Evictions = append(res.Evictions, Eviction{ReplicaID: v.Replica.ID, MachineID: best.ID, PreemptedBy: r.ID})
	}
	why, gpus := dynamicFit(best, r, t.withGPU)
	if why != "" {
		return nil, nil, tier{}, false // victimsFor simulated exactly this; cannot happen
	}
	return best, gpus, t, true
}

// victimsFor simulates evicting lower-priority residents, lowest priority
// first, until r fits; it changes nothing.
func victimsFor(m *Machine, r *Replica, withGPU bool) ([]Resident, bool) {
	var lower []Resident
	for _, res := range m.Residents {
		if res.Priority < r.Priority {
			lower = append(lower, res)
		}
	}
	sort.SliceStable(lower, func(i, j int) bool {
		if lower[i].Priority != lower[j].Priority {
			return lower[i].Priority < lower[j].Priority
		}
		return lower[i].Replica.ID < lower[j].Replica.ID
	})
	trial := *m
	trial.shared = false // its own copies, below
	trial.GPUs = append([]GPU(nil), m.GPUs...)
	trial.ServiceCount = make(map[string]int, len(m.ServiceCount))
	for k, v := range m.ServiceCount {
		trial.ServiceCount[k] = v
	}
	for i := 0; i <= len(lower); i++ {
		if why, _ := dynamicFit(&trial, r, withGPU); why == "" {
			return lower[:i], true
		}
		if i < len(lower) {
			Unassign(&trial, *lower[i].Replica, lower[i].GPUs)
		}
	}
	return nil, false
}

// removeResident returns the residents without id, leaving rs as it was:
// clones of a machine share their residents until one is preempted.
func removeResident(rs []Resident, id string) []Resident {
	out := make([]Resident, 0, len(rs))
	for _, r := range rs {
		if r.Replica.ID != id {
			out = append(out, r)
		}
	}
	return out
}
