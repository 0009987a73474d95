package scheduler

import (
	"sort"

	"github.com/gantry-dev/gantry/api"
)

// state is one pass: machines in placement order (fullest first, then by
// id), with each machine's position in that order.
type state struct {
	order     []*Machine
	rank      map[*Machine]int
	perClust  map[string]int
	teeInClus map[string]bool
}

func newState(machines []*Machine) *state {
	order := append([]*Machine(nil), machines...)
	scores := make(map[*Machine]float64, len(order))
	for _, m := range order {
		scores[m] = packScore(m)
	}
	sort.Slice(order, func(i, j int) bool {
		si, sj := scores[order[i]], scores[order[j]]
		if si != sj {
			return si > sj
		}
		return order[i].ID < order[j].ID
	})
	st := &state{order: order, rank: make(map[*Machine]int, len(order)), perClust: map[string]int{}, teeInClus: map[string]bool{}}
	for i, m := range order {
		st.rank[m] = i
		st.perClust[m.Cluster]++
		if m.TEE {
			st.teeInClus[m.Cluster] = true
		}
	}
	return st
}

// tier is a set of machines tried in turn, and how replicas run there.
type tier struct {
	machines []*Machine
	withGPU  bool
	tee      bool
	note     string
}

func (st *state) placeClass(cl *class, res *Result) {
	r := cl.replicas[0]
	tally := &missTally{total: st.perClust[r.Cluster]}
	if r.Isolation == api.IsolationTEERequired && !st.teeInClus[r.Cluster] {
		for _, rep := range cl.replicas {
			res.Unplaced[rep.ID] = "no TEE runtime in cluster " + r.Cluster + " (isolation teeRequired: prerequisite missing)"
		}
		return
	}
	var eligible []*Machine
	for _, m := range st.order {
		if m.Cluster != r.Cluster {
			continue
		}
		if why := staticFit(m, &r); why != "" {
			tally.add(why)
			continue
		}
		eligible = append(eligible, m)
	}
	if r.SameZone {
		zone := sameZoneChoice(eligible, r.Service)
		eligible = inZone(eligible, zone, tally)
	}
	tiers := st.tiersFor(&r, eligible)
	pickers := make([]picker, len(tiers))
	for i, t := range tiers {
		pickers[i] = st.pickerFor(&r, t, eligible, tally)
	}
	for _, rep := range cl.replicas {
		placed := false
		for i, t := range tiers {
			m, gpus := pickers[i].pick(&rep)
			if m == nil {
				continue
			}
			Assign(m, rep, gpus)
			pickers[i].placed(m)
			res.Placements = append(res.Placements, Placement{ReplicaID: rep.ID, MachineID: m.ID, GPUs: gpus, TEE: t.tee, Note: t.note})
			placed = true
			break
		}
		if !placed {
			res.Unplaced[rep.ID] = tally.reason()
		}
	}
}

// tiersFor splits eligible machines by preference: TEE machines first for
// teePreferred, GPU machines first for a preferred GPU.
func (st *state) tiersFor(r *Replica, eligible []*Machine) []tier {
	teeTiers := []tier{{machines: eligible, tee: r.Isolation == api.IsolationTEERequired}}
	if r.Isolation == api.IsolationTEEPreferred {
		with, without := split(eligible, func(m *Machine) bool { return m.TEE })
		teeTiers = []tier{{machines: with, tee: true}, {machines: without, note: "no TEE capacity: running on the standard runtime (isolation teePreferred)"}}
	}
	if r.GPU == nil {
		return teeTiers
	}
	if !r.GPU.Preferred {
		for i := range teeTiers {
			teeTiers[i].withGPU = true
		}
		return teeTiers
	}
	var out []tier
	for _, t := range teeTiers {
		with, _ := split(t.machines, func(m *Machine) bool { return matchingGPUs(m, r.GPU, false) >= r.GPU.Count })
		out = append(out, tier{machines: with, withGPU: true, tee: t.tee, note: t.note})
		note := "no free matching GPU: running without GPUs (gpu policy preferred)"
		if t.note != "" {
			note = t.note + "; " + note
		}
		// Without GPUs, any eligible machine will do; machines without GPUs
		// first, to keep GPUs for replicas that use them.
		plain, gpuMachines := split(t.machines, func(m *Machine) bool { return len(m.GPUs) == 0 })
		out = append(out, tier{machines: append(plain, gpuMachines...), tee: t.tee, note: note})
	}
	return out
}

func split(ms []*Machine, pred func(*Machine) bool) (yes, no []*Machine) {
	for _, m := range ms {
		if pred(m) {
			yes = append(yes, m)
		} else {
			no = append(no, m)
		}
	}
	return yes, no
}

// sameZoneChoice is the zone the service already runs in (the one with
// most replicas), else the zone with the most free CPU.
func sameZoneChoice(eligible []*Machine, service string) string {
	running := map[string]int{}
	free := map[string]int64{}
	for _, m := range eligible {
		running[m.Zone] += m.ServiceCount[service]
		free[m.Zone] += m.Free().MilliCPU
	}
	best := ""
	for z := range free {
		if best == "" || running[z] > running[best] || (running[z] == running[best] && (free[z] > free[best] || (free[z] == free[best] && z < best))) {
			best = z
		}
	}
	return best
}

func inZone(ms []*Machine, zone string, tally *missTally) []*Machine {
	var out []*Machine
	for _, m := range ms {
		if m.Zone == zone {
			out = append(out, m)
		} else {
			tally.add("sameZone: service runs in zone " + zone)
		}
	}
	return out
}
