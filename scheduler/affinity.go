package scheduler

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gantry-dev/gantry/api"
)

// affinity is what one replica's affinity and anti-affinity terms see at
// one instant: for each term, the replicas of the cluster that match its
// selector, in total and per zone. Replicas match by their service's
// labels.
type affinity struct {
	st    *state
	terms []termView
	// shunned are other services' required anti-affinity terms that
	// select this replica: as in Kubernetes, it keeps away from them too.
	shunned []shunned
}

// shunned is a service whose replicas' anti-affinity selects the replica
// being placed, counted per zone.
type shunned struct {
	service  string
	topology string
	zones    map[string]int
}

type termView struct {
	api.AffinityTerm
	anti bool
	// self: the replica matches its own selector (the first of a group).
	self  bool
	total int
	zones map[string]int
}

// hasAffinity: r has terms of its own, or other services' required
// anti-affinity selects it.
func (st *state) hasAffinity(r *Replica) bool {
	return r.Terms != nil || len(st.shunnedBy(r)) > 0
}

// learnLabels records the labels and the required anti-affinity terms of
// the replicas' services.
func (st *state) learnLabels(rs []Replica) {
	for _, r := range rs {
		if _, ok := st.labels[r.Service]; !ok && r.Labels != nil {
			st.labels[r.Service] = r.Labels
		}
		if _, ok := st.anti[r.Service]; ok {
			continue
		}
		for _, t := range r.antiAffinity() {
			if t.Required() {
				st.anti[r.Service] = append(st.anti[r.Service], t)
			}
		}
	}
}

// shunnedBy are the other services' required anti-affinity terms that
// select r, by service and topology.
func (st *state) shunnedBy(r *Replica) []shunned {
	var out []shunned
	for svc, terms := range st.anti {
		if svc == r.Service {
			continue // its own terms are r's terms
		}
		for _, t := range terms {
			if labelsMatch(r.Labels, t.Selector) {
				out = append(out, shunned{service: svc, topology: t.Topology})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].service != out[j].service {
			return out[i].service < out[j].service
		}
		return out[i].topology < out[j].topology
	})
	return out
}

// affinityOf counts, for each of r's terms, the matching replicas of r's
// cluster (r itself is not placed yet, so it never counts).
func (st *state) affinityOf(r *Replica) *affinity {
	a := &affinity{st: st}
	for i, terms := range [][]api.AffinityTerm{r.affinity(), r.antiAffinity()} {
		for _, t := range terms {
			tv := termView{AffinityTerm: t, anti: i == 1, self: labelsMatch(r.Labels, t.Selector), zones: map[string]int{}}
			for _, m := range st.order {
				if m.Cluster != r.Cluster {
					continue
				}
				n := st.matching(m, t.Selector)
				tv.total += n
				tv.zones[m.Zone] += n
			}
			a.terms = append(a.terms, tv)
		}
	}
	for _, sh := range st.shunnedBy(r) {
		sh.zones = map[string]int{}
		for _, m := range st.order {
			if m.Cluster == r.Cluster {
				sh.zones[m.Zone] += m.ServiceCount[sh.service]
			}
		}
		a.shunned = append(a.shunned, sh)
	}
	return a
}

// matching counts the replicas on m whose service's labels match sel.
func (st *state) matching(m *Machine, sel map[string]string) int {
	n := 0
	for svc, count := range m.ServiceCount {
		if labels, ok := st.labels[svc]; ok && labelsMatch(labels, sel) {
			n += count
		}
	}
	return n
}

// inTopology is how many matching replicas share m's machine or zone.
func (a *affinity) inTopology(m *Machine, t termView) int {
	if t.Topology == api.SpreadZone {
		return t.zones[m.Zone]
	}
	return a.st.matching(m, t.Selector)
}

// violation is why m breaks a required term, or "". As in Kubernetes, a
// required affinity to replicas that run nowhere yet holds anywhere for a
// replica that matches its own selector (the first of a group goes where
// it fits, the others follow it), and nowhere for any other.
func (a *affinity) violation(m *Machine) string {
	for _, t := range a.terms {
		if !t.Required() {
			continue
		}
		n := a.inTopology(m, t)
		switch {
		case t.anti && n > 0:
			return fmt.Sprintf("anti-affinity: a replica matching %s on the same %s", selectorString(t.Selector), t.Topology)
		case !t.anti && n == 0 && (t.total > 0 || !t.self):
			return fmt.Sprintf("affinity: no replica matching %s on the same %s", selectorString(t.Selector), t.Topology)
		}
	}
	for _, sh := range a.shunned {
		n := m.ServiceCount[sh.service]
		if sh.topology == api.SpreadZone {
			n = sh.zones[m.Zone]
		}
		if n > 0 {
			return fmt.Sprintf("anti-affinity of %s: it keeps replicas like this one off its %s", sh.service, sh.topology)
		}
	}
	return ""
}

// preference is the weight of the preferred terms m satisfies, minus the
// weight of those it breaks.
func (a *affinity) preference(m *Machine) int {
	score := 0
	for _, t := range a.terms {
		if t.Required() {
			continue
		}
		n := a.inTopology(m, t)
		switch {
		case t.anti && n > 0:
			score -= t.Weight
		case !t.anti && n > 0:
			score += t.Weight
		}
	}
	return score
}

// zoneHint is a zone where a new machine would keep the required zone
// terms (the zone of the replicas an affinity follows; one an
// anti-affinity's replicas are not in), "" when any will do or none can.
func (a *affinity) zoneHint(domains []string) string {
	allowed := append([]string(nil), domains...)
	for _, t := range a.terms {
		if !t.Required() || t.Topology != api.SpreadZone || t.total == 0 && !t.anti && t.self {
			continue
		}
		var keep []string
		for z, n := range t.zones {
			if !t.anti && n > 0 {
				keep = append(keep, z)
			}
		}
		if t.anti {
			keep = nil
			for _, z := range allowed {
				if t.zones[z] == 0 {
					keep = append(keep, z)
				}
			}
		} else if len(allowed) > 0 {
			keep = intersect(keep, allowed)
		}
		allowed = keep
	}
	sort.Strings(allowed)
	if len(allowed) == 0 {
		return ""
	}
	return allowed[0]
}

func intersect(a, b []string) []string {
	in := map[string]bool{}
	for _, x := range b {
		in[x] = true
	}
	var out []string
	for _, x := range a {
		if in[x] {
			out = append(out, x)
		}
	}
	return out
}

func selectorString(sel map[string]string) string {
	parts := make([]string, 0, len(sel))
	for k, v := range sel {
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}
