package scheduler

import (
	"sort"

	"github.com/gantry-dev/gantry/api"
)

// state is one pass: machines in placement order (fullest first, then by
// id), with each machine's position in that order.
type state struct {
	order     []*Machine
	perClust  map[string]int
	teeInClus map[string]bool
	// labels are the labels of each service seen (residents' and
	// pending replicas'), for affinity selectors.
	labels map[string]map[string]string
	// anti are each service's required anti-affinity terms.
	anti map[string][]api.AffinityTerm
}

type scored struct {
	m     *Machine
	score float64
}

func newState(machines []*Machine) *state {
	byScore := make([]scored, len(machines))
	for i, m := range machines {
		byScore[i] = scored{m, packScore(m)}
	}
	sort.Slice(byScore, func(i, j int) bool {
		if byScore[i].score != byScore[j].score {
			return byScore[i].score > byScore[j].score
		}
		return byScore[i].m.ID < byScore[j].m.ID
	})
	order := make([]*Machine, len(byScore))
	st := &state{order: order, perClust: map[string]int{}, teeInClus: map[string]bool{}, labels: map[string]map[string]string{}, anti: map[string][]api.AffinityTerm{}}
	for i, s := range byScore {
		order[i] = s.m
		s.m.rank = i
		for _, res := range s.m.Residents {
			st.learnLabels([]Replica{res.Replica})
		}
		st.perClust[s.m.Cluster]++
		if s.m.TEE {
			st.teeInClus[s.m.Cluster] = true
		}
	}
	return st
}

// tier is a set of machines tried in turn, and how replicas run there.
type tier struct {
	machines []*Machine
	accepts  func(*Machine) bool
	withGPU  bool
	tee      bool
	note     string
}

// add records a machine opened during the pass.
func (st *state) add(m *Machine) {
	m.rank = len(st.order)
	st.order = append(st.order, m)
	st.perClust[m.Cluster]++
	if m.TEE {
		st.teeInClus[m.Cluster] = true
	}
}

func (st *state) placeClass(cl *class, res *Result, open Opener) {
	r := cl.replicas[0]
	tally := &missTally{total: st.perClust[r.Cluster]}
	if r.Isolation == api.IsolationTEERequired && !st.teeInClus[r.Cluster] && open == nil {
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
	zone := ""
	if r.SameZone {
		zone = sameZoneChoice(eligible, r.Service)
		eligible = inZone(eligible, zone, tally)
	}
	tiers := tiersFor(&r, eligible)
	pickers := make([]picker, len(tiers))
	for i, t := range tiers {
		pickers[i] = st.pickerFor(&r, t, eligible, tally)
	}
	for _, rep := range cl.replicas {
		m, gpus, t, ok := pickIn(tiers, pickers, &rep)
		if !ok && open != nil {
			hint := zone
			if hint == "" {
				hint = zoneHint(pickers, &rep)
			}
			fresh, why := open(&rep, hint)
			if fresh == nil {
				res.Unplaced[rep.ID] = tally.reason() + "; " + why
				continue
			}
			st.add(fresh)
			if r.SameZone && zone == "" {
				zone = fresh.Zone
			}
			for i := range tiers {
				if staticFit(fresh, &r) == "" && (zone == "" || fresh.Zone == zone) && tiers[i].accepts(fresh) {
					pickers[i].add(fresh)
					break
				}
			}
			m, gpus, t, ok = pickIn(tiers, pickers, &rep)
		}
		if !ok && rep.Preempt && open == nil {
			m, gpus, t, ok = st.preempt(eligible, tiers, &rep, res)
		}
		if !ok {
			res.Unplaced[rep.ID] = tally.reason()
			continue
		}
		Assign(m, rep, gpus)
		res.Placements = append(res.Placements, Placement{ReplicaID: rep.ID, MachineID: m.ID, GPUs: gpus, TEE: t.tee, Note: t.note})
	}
}

func pickIn(tiers []tier, pickers []picker, r *Replica) (*Machine, []int, tier, bool) {
	for i, t := range tiers {
		if m, gpus := pickers[i].pick(r); m != nil {
			pickers[i].placed(m)
			return m, gpus, t, true
		}
	}
	return nil, nil, tier{}, false
}

// zoneHint asks a zone-spread picker which zone needs a replica next, or
// the affinity terms which zone a new machine must be in.
func zoneHint(pickers []picker, r *Replica) string {
	for _, p := range pickers {
		switch p := p.(type) {
		case *zoneSpread:
			return p.leastLoaded()
		case *scan:
			if p.st.hasAffinity(r) {
				return p.st.affinityOf(r).zoneHint(r.ZoneDomains)
			}
		}
	}
	return ""
}

// tiersFor splits eligible machines by preference: TEE machines first for
// teePreferred, GPU machines first for a preferred GPU.
func tiersFor(r *Replica, eligible []*Machine) []tier {
	all := func(*Machine) bool { return true }
	teeTiers := []tier{{machines: eligible, accepts: all, tee: r.Isolation == api.IsolationTEERequired}}
	if r.Isolation == api.IsolationTEEPreferred {
		isTEE := func(m *Machine) bool { return m.TEE }
		notTEE := func(m *Machine) bool { return !m.TEE }
		teeTiers = []tier{
			{machines: filter(eligible, isTEE), accepts: isTEE, tee: true},
			{machines: filter(eligible, notTEE), accepts: notTEE, note: "no TEE capacity: running on the standard runtime (isolation teePreferred)"},
		}
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
	hasGPUs := func(m *Machine) bool { return matchingGPUs(m, r.GPU, false) >= r.GPU.Count }
	var out []tier
	for _, t := range teeTiers {
		inTier := t.accepts
		out = append(out, tier{machines: filter(t.machines, hasGPUs), accepts: func(m *Machine) bool { return inTier(m) && hasGPUs(m) },
			withGPU: true, tee: t.tee, note: t.note})
		note := "no free matching GPU: running without GPUs (gpu policy preferred)"
		if t.note != "" {
			note = t.note + "; " + note
		}
		// Without GPUs, any machine of the tier will do; machines without
		// GPUs first, to keep GPUs for replicas that use them.
		noGPUs := filter(t.machines, func(m *Machine) bool { return len(m.GPUs) == 0 })
		withAny := filter(t.machines, func(m *Machine) bool { return len(m.GPUs) > 0 })
		out = append(out, tier{machines: append(noGPUs, withAny...), accepts: inTier, tee: t.tee, note: note})
	}
	return out
}

func filter(ms []*Machine, pred func(*Machine) bool) []*Machine {
	var out []*Machine
	for _, m := range ms {
		if pred(m) {
			out = append(out, m)
		}
	}
	return out
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
