package scheduler

import (
	"fmt"
	"slices"
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
	for i := range rs {
		st.learn(&rs[i])
	}
}

// learn notes a replica's service's labels and required anti-affinity
// terms (its replicas share the labels; the terms are the first
// revision's that has any).
func (st *state) learn(r *Replica) {
	if _, ok := st.labels[r.Service]; !ok && r.Labels != nil {
		st.labels[r.Service] = r.Labels
		clear(st.shunned)
		st.labelsEpoch++
	}
	if _, ok := st.anti[r.Service]; ok {
		return
	}
	for _, t := range r.antiAffinity() {
		if t.Required() {
			st.anti[r.Service] = append(st.anti[r.Service], t)
			clear(st.shunned)
			st.labelsEpoch++
		}
	}
}

// shunnedBy are the other services' required anti-affinity terms that
// select r, by service and topology; kept by service until the labels
// or terms learnt change (a service's replicas share their labels), as
// every class of every what-if asks (a walk of every service's terms).
// The list is shared: not to be changed.
func (st *state) shunnedBy(r *Replica) []shunned {
	if out, ok := st.shunned[r.Service]; ok {
		return out
	}
	out := st.shunnedAfresh(r)
	st.shunned[r.Service] = out
	return out
}

func (st *state) shunnedAfresh(r *Replica) []shunned {
	var out []shunned
	for svc, terms := range st.anti {
		if svc == r.Service {
			continue // its own terms are r's terms
		}
		for _, t := range terms {
			if api.LabelsMatch(r.Labels, t.Selector) {
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

// apartOnMachines is, for a replica whose every rule of affinity keeps
// it off machines (required anti-affinity terms on machine, its own or
// other services' that select it: no affinity, nothing preferred, no
// zone), what a machine must not run for it to take the replica; false
// for any other. A machine that runs such a replica keeps running it
// while one class is placed, so the indexed picker can skip it for the
// rest of the class, like a dedicated one, instead of counting matches
// on every machine for every replica.
func (st *state) apartOnMachines(r *Replica) (apart, bool) {
	if r.Terms == nil || len(r.Terms.Affinity) > 0 || len(r.Terms.AntiAffinity) == 0 {
		return apart{}, false
	}
	var from []string
	for _, t := range r.Terms.AntiAffinity {
		if !t.Required() || t.Topology != api.SpreadMachine {
			return apart{}, false
		}
		from = append(from, "selector "+api.SelectorString(t.Selector))
	}
	terms := r.Terms.AntiAffinity
	var others []shunned
	all := st.shunnedBy(r)
	for _, sh := range all {
		if sh.topology != api.SpreadMachine {
			return apart{}, false
		}
		if !slices.ContainsFunc(terms, func(t api.AffinityTerm) bool { return api.LabelsMatch(st.labels[sh.service], t.Selector) }) {
			others = append(others, sh) // else r's own terms keep it off that service's machines
			from = append(from, "service "+sh.service)
		}
	}
	slices.Sort(from)
	keeps := func(service string) bool {
		labels, known := st.labels[service] // as matching counts them
		return known && slices.ContainsFunc(terms, func(t api.AffinityTerm) bool { return api.LabelsMatch(labels, t.Selector) }) ||
			slices.ContainsFunc(others, func(sh shunned) bool { return sh.service == service })
	}
	return apart{key: strings.Join(from, "\x00"), selfOnly: len(all) == 0 && st.selectsItsOwnAlone(r, terms), keeps: keeps}, true
}

// selectsItsOwnAlone: r's one term selects r's service and no other.
func (st *state) selectsItsOwnAlone(r *Replica, terms []api.AffinityTerm) bool {
	if len(terms) != 1 || !api.LabelsMatch(r.Labels, terms[0].Selector) {
		return false
	}
	for svc, labels := range st.labels {
		if svc != r.Service && api.LabelsMatch(labels, terms[0].Selector) {
			return false
		}
	}
	return true
}

// apart is what a class keeps apart from on machines: key names it,
// keeps says whether it keeps apart from a service's replicas; selfOnly,
// that it is its own service's replicas alone.
type apart struct {
	key      string
	selfOnly bool
	keeps    func(service string) bool
}

// blocked reports whether m runs a replica the class keeps apart from.
func (a apart) blocked(m *Machine) bool {
	for svc, n := range m.ServiceCount {
		if n > 0 && a.keeps(svc) {
			return true
		}
	}
	return false
}

// affinityOf counts, for each of r's terms, the matching replicas of r's
// cluster (r itself is not placed yet, so it never counts).
func (st *state) affinityOf(r *Replica) *affinity {
	a := &affinity{st: st}
	for i, terms := range [][]api.AffinityTerm{r.affinity(), r.antiAffinity()} {
		for _, t := range terms {
			tv := termView{AffinityTerm: t, anti: i == 1, self: api.LabelsMatch(r.Labels, t.Selector), zones: map[string]int{}}
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
		if labels, ok := st.labels[svc]; ok && api.LabelsMatch(labels, sel) {
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

// breaks reports whether a required term fails with n matching replicas
// in the topology. As in Kubernetes, a required affinity to replicas that
// run nowhere yet holds anywhere for a replica that matches its own
// selector (the first of a group goes where it fits, the others follow
// it), and nowhere for any other.
func (t termView) breaks(n int) bool {
	if t.anti {
		return n > 0
	}
	return n == 0 && (t.total > 0 || !t.self)
}

// violation is why m breaks a required term, or "".
func (a *affinity) violation(m *Machine) string {
	for _, t := range a.terms {
		if !t.Required() || !t.breaks(a.inTopology(m, t)) {
			continue
		}
		if t.anti {
			return fmt.Sprintf("anti-affinity: a replica matching %s on the same %s", api.SelectorString(t.Selector), t.Topology)
		}
		return fmt.Sprintf("affinity: no replica matching %s on the same %s", api.SelectorString(t.Selector), t.Topology)
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
		if t.Required() || a.inTopology(m, t) == 0 {
			continue
		}
		if t.anti {
			score -= t.Weight
		} else {
			score += t.Weight
		}
	}
	return score
}

// zoneHint is the first zone (of domains and the zones replicas run in)
// where a new machine keeps every required zone term, "" when no zone term
// constrains the replica or no zone can.
func (a *affinity) zoneHint(domains []string) string {
	var zoneTerms []termView
	var zoneShunned []shunned
	candidates := map[string]bool{}
	for _, z := range domains {
		candidates[z] = true
	}
	for _, t := range a.terms {
		if t.Required() && t.Topology == api.SpreadZone {
			zoneTerms = append(zoneTerms, t)
		}
		for z := range t.zones {
			candidates[z] = true
		}
	}
	for _, sh := range a.shunned {
		if sh.topology == api.SpreadZone {
			zoneShunned = append(zoneShunned, sh)
		}
	}
	if len(zoneTerms)+len(zoneShunned) == 0 {
		return ""
	}
	var allowed []string
	for z := range candidates {
		ok := !slices.ContainsFunc(zoneTerms, func(t termView) bool { return t.breaks(t.zones[z]) }) &&
			!slices.ContainsFunc(zoneShunned, func(sh shunned) bool { return sh.zones[z] > 0 })
		if ok {
			allowed = append(allowed, z)
		}
	}
	if len(allowed) == 0 {
		return ""
	}
	return slices.Min(allowed)
}

// KeptApartBroken is the first pair of replicas of rs, which share one
// machine, that a required anti-affinity on machine keeps apart: the
// first carries a term that selects the second. ok is false when none
// does. Tests check plans and placements with it.
func KeptApartBroken(rs []Replica) (carrier, selected Replica, ok bool) {
	for i, a := range rs {
		for j, b := range rs {
			if i == j {
				continue
			}
			for _, t := range a.antiAffinity() {
				if t.Required() && t.Topology == api.SpreadMachine && api.LabelsMatch(b.Labels, t.Selector) {
					return a, b, true
				}
			}
		}
	}
	return Replica{}, Replica{}, false
}
