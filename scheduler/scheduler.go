// Package scheduler places replicas on machines. It is a pure function of a
// snapshot: the same input always gives the same output, and no machine is
// ever allocated beyond its allocatable resources or GPUs.
//
// Replicas of one service form a class with identical needs: static
// filters run once per class, and within a class a machine that cannot
// take a replica never can later in the pass (resources only shrink), so
// pickers skip it for good. That keeps a pass near-linear in machines +
// replicas.
package scheduler

import (
	"cmp"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/gantry-dev/gantry/api"
)

// Runtimes a machine can offer.
const (
	RuntimeProcess = "process"
	RuntimeDocker  = "docker"
)

// GPU is one device of a machine.
type GPU struct {
	Index  int
	Type   string
	VRAMGB float64
	Used   bool
}

// Machine is a schedulable machine in the snapshot.
type Machine struct {
	ID           string
	Cluster      string
	Group        string
	Zone         string
	CapacityType string
	Labels       map[string]string
	Runtimes     []string
	// TEE is true when the machine offers a TEE/sandbox runtime.
	TEE          bool
	GPUs         []GPU
	Allocatable  api.Resources
	Allocated    api.Resources
	PricePerHour float64
	// ServiceCount is how many replicas of each service run here.
	ServiceCount map[string]int
	// Residents are the replicas running here, for preemption.
	Residents []Resident
	// PlainResidents: the first this many Residents teach a session
	// nothing (Replica.Teaches is false for each), so it does not look at
	// their rules (a walk of 500,000 residents' rules every pass). Set by
	// whoever books the residents; 0 (the default) looks at every one.
	PlainResidents int

	rank int // position in the current pass's placement order
	// slots are the machine's places in the pass's fit indexes.
	slots []slot
	// excluded: a what-if is emptying the machine; nothing goes on it.
	excluded bool
	// shared: ServiceCount and GPUs are another copy's (Share); the first
	// change takes its own.
	shared bool
}

// Free is what is left to allocate.
func (m *Machine) Free() api.Resources { return m.Allocatable.Sub(m.Allocated) }

// Clone copies a machine, so that placing on the copy leaves it as it was.
func (m *Machine) Clone() *Machine {
	c := *m
	c.slots, c.excluded, c.shared = nil, false, false
	c.GPUs = slices.Clone(m.GPUs)
	c.ServiceCount = maps.Clone(m.ServiceCount)
	if c.ServiceCount == nil {
		c.ServiceCount = map[string]int{}
	}
	// Residents are shared: they only ever change by removeResident, which
	// copies, and appends to a clipped slice copy too.
	c.Residents = m.Residents[:len(m.Residents):len(m.Residents)]
	return &c
}

// Share copies a machine cheaply: the copy shares its counts of
// services and its devices with m until it books or unbooks a replica,
// which copies them first. A machine kept across passes is handed to each
// pass this way, and stays as it was.
func (m *Machine) Share() *Machine {
	c := new(Machine)
	m.ShareInto(c)
	return c
}

// ShareInto makes c a copy of m as Share does (for copies made in bulk).
func (m *Machine) ShareInto(c *Machine) {
	*c = *m
	c.slots, c.excluded, c.shared = nil, false, true
	c.Residents = m.Residents[:len(m.Residents):len(m.Residents)]
}

// Equal: the machines are the same to a session, field for field, counts
// and residents alike, whether or not either shares its counts with
// another copy (Share).
func (m *Machine) Equal(o *Machine) bool {
	a, b := *m, *o
	a.shared, b.shared = false, false
	return reflect.DeepEqual(&a, &b)
}

// own gives a shared machine its own counts and devices.
func (m *Machine) own() {
	if !m.shared {
		return
	}
	m.GPUs = slices.Clone(m.GPUs)
	m.ServiceCount = maps.Clone(m.ServiceCount)
	m.shared = false
}

// Resident is a replica already on a machine. Its Replica is shared,
// not copied (a large fleet's pass holds 500,000 of them): it must not
// be changed.
type Resident struct {
	Replica  *Replica
	Priority int
	GPUs     []int
}

// GPUNeed is a replica's GPU requirement.
type GPUNeed struct {
	Count     int
	Type      string
	MinVRAMGB float64
	// Preferred: take GPUs where free, else run without them.
	Preferred bool
}

// Replica is a replica to place, with what it asks of its machine.
type Replica struct {
	ID    string
	Index int
	// Requests are CPU, memory and ephemeral storage; GPUs come from GPU.
	Requests api.Resources
	// Rules are what its service and revision ask, shared by the replicas
	// of one revision: a pass at 50,000 machines holds 500,000 running
	// replicas, and a copy of the rules in each was 200 of its 264 bytes.
	// Shared, so never changed through a replica: set a new Rules.
	*Rules
}

// Teaches: r's rules have labels or affinity terms, which a session
// learns from the machines r runs on.
func (r *Replica) Teaches() bool { return r.Labels != nil || r.Terms != nil }

// Reruled is r with its own copy of its rules, changed by change.
func (r Replica) Reruled(change func(*Rules)) Replica {
	rules := *r.Rules
	change(&rules)
	r.Rules = &rules
	return r
}

// Rules are what a service's revision asks of every replica's machine.
type Rules struct {
	Service string
	Cluster string
	Runtime string
	GPU     *GPUNeed
	// Isolation is one of the api.Isolation* values ("" = any).
	Isolation string
	// Groups pins the replica to capacity groups (any group when empty).
	Groups       []string
	NodeSelector map[string]string
	Dedicated    bool
	SameZone     bool
	Priority     int
	Scoring      string
	// Spread limits the skew of this service's replicas over machines or
	// zones, counted among the machines the replica may use.
	Spread []api.SpreadRule
	// ZoneDomains are zones that count for zone spread even with no
	// machine yet (the planner passes the zones a group may launch in).
	ZoneDomains []string
	// Preempt lets the replica evict lower-priority residents.
	Preempt bool
	// Labels are the replica's service's labels, which affinity terms
	// select; Terms are its service's affinity terms (nil: none, which
	// keeps the replicas of a large pass small).
	Labels map[string]string
	Terms  *Terms
}

// Terms are a service's affinity and anti-affinity terms.
type Terms struct {
	Affinity     []api.AffinityTerm
	AntiAffinity []api.AffinityTerm
}

func (r *Replica) affinity() []api.AffinityTerm {
	if r.Terms == nil {
		return nil
	}
	return r.Terms.Affinity
}

func (r *Replica) antiAffinity() []api.AffinityTerm {
	if r.Terms == nil {
		return nil
	}
	return r.Terms.AntiAffinity
}

// Placement assigns a replica to a machine.
type Placement struct {
	ReplicaID string
	MachineID string
	// GPUs are the device indexes given to the replica.
	GPUs []int
	// TEE: run on the machine's TEE runtime.
	TEE bool
	// Note tells which soft preference could not be met.
	Note string
}

// Result is the outcome of a scheduling pass.
type Result struct {
	Placements []Placement
	// Unplaced maps a replica to why no machine took it.
	Unplaced map[string]string
	// Evictions are residents preempted by higher-priority replicas.
	Evictions []Eviction
}

// Eviction is a resident replica that must leave its machine.
type Eviction struct {
	ReplicaID   string
	MachineID   string
	PreemptedBy string
}

// Schedule places pending replicas, highest priority first, largest first
// within a priority. Machines are updated in place with what was placed.
// With nothing pending it builds no session: a pass that places nothing
// (most passes) would sort and index every machine for nothing.
func Schedule(machines []*Machine, pending []Replica) Result {
	return (*Scratch)(nil).Schedule(machines, pending)
}

// Opener adds a machine for a replica that fits nowhere (the planner's new
// capacity), or returns nil and why not. zoneHint, when set, is the zone a
// spread or sameZone rule wants.
type Opener func(r *Replica, zoneHint string) (*Machine, string)

// Session is one placement pass over a set of machines that may grow.
type Session struct {
	st     *state
	demand api.Resources
}

// Balance makes the session interleave classes by shape (within a
// priority): CPU-heavy and memory-heavy classes alternate, so each new
// machine fills both resources in the ratio of the total demand instead of
// running out of one while the other sits idle. The planner uses it.
func (s *Session) Balance(demand api.Resources) *Session {
	s.demand = demand
	return s
}

// NewSession starts a pass over machines.
func NewSession(machines []*Machine) *Session { return (*Scratch)(nil).NewSession(machines) }

// Place places replicas; with an opener, a replica that fits nowhere gets
// a new machine when the opener can make one.
func (s *Session) Place(pending []Replica, open Opener) Result {
	s.st.learnLabels(pending)
	s.st.explained = nil // the machines may have changed since the last call
	res := Result{Unplaced: map[string]string{}}
	for _, cl := range classesOf(pending, s.demand) {
		s.st.placeClass(cl, &res, open)
	}
	return res
}

// Add brings machines opened outside the session into it (with what was
// booked on them), after the ones it has.
func (s *Session) Add(machines ...*Machine) {
	for _, m := range machines {
		s.st.add(m)
	}
}

// Learn tells the session about replicas already on its machines (their
// services' labels and anti-affinity terms), for affinity rules of what
// it places later.
func (s *Session) Learn(replicas []Replica) { s.st.learnLabels(replicas) }

// Fill places replicas where there is room, opening nothing; the ones
// left over are in Unplaced without an explanation (the caller places
// them elsewhere).
func (s *Session) Fill(pending []Replica) Result {
	s.st.terse = true
	defer func() { s.st.terse = false }()
	return s.Place(pending, nil)
}

// PlaceAll places every replica or stops at the first that fits nowhere
// (what-if moves need all or nothing; the caller undoes the placements of
// a failed attempt).
func (s *Session) PlaceAll(pending []Replica) (Result, bool) {
	s.st.terse = true // a what-if needs no explanation
	defer func() { s.st.terse = false }()
	s.st.learnLabels(pending)
	res := s.st.whatIfResult()
	defer func() { s.st.keepWhatIfResult(res) }() // res as returned
	for _, cl := range classesOf(pending, s.demand) {
		s.st.placeClass(cl, &res, nil)
		if len(res.Unplaced) > 0 {
			return res, false
		}
	}
	return res, true
}

// NoPreempting makes the session place every replica as if its rules
// did not let it preempt: it evicts no resident. What-ifs that move
// replicas need it (a move that evicts another replica is no move), and
// telling the session costs nothing, where a copy of each replica's
// rules read every replica of each what-if.
func (s *Session) NoPreempting() *Session {
	s.st.noPreempt = true
	return s
}

// ReuseWhatIfs makes PlaceAll and PlaceAllOn return their placements and
// unplaced replicas in a list and a map the session keeps: each result
// is good until the next call of either. A look's what-ifs, thousands a
// pass at 10,000 machines, each undone or kept at once, each allocated
// both.
func (s *Session) ReuseWhatIfs() *Session {
	s.st.reuse = &whatIfLists{unplaced: map[string]string{}}
	return s
}

// PlaceAllOn is PlaceAll that also stops at the first replica whose
// machine, once picked, accepts refuses: that replica is left unplaced
// and nothing is booked for it. A what-if that the caller would refuse
// for where it puts a replica ends there, not after placing the rest.
// The replicas before it are placed as PlaceAll places them. A replica
// that may preempt has evicted before accepts is asked.
func (s *Session) PlaceAllOn(pending []Replica, accepts func(*Machine) bool) (Result, bool) {
	s.st.accepts = accepts
	defer func() { s.st.accepts = nil }()
	return s.PlaceAll(pending)
}

// Machines are the session's machines, opened ones included.
func (s *Session) Machines() []*Machine { return s.st.order }

// Assign books a replica's requests (and GPU devices) on a machine.
func Assign(m *Machine, r Replica, gpus []int) {
	m.own()
	req := r.Requests
	req.GPUs = len(gpus) // GPUs are booked by device, never by count alone
	m.Allocated = m.Allocated.Add(req)
	for _, idx := range gpus {
		for i := range m.GPUs {
			if m.GPUs[i].Index == idx {
				m.GPUs[i].Used = true
			}
		}
	}
	if m.ServiceCount == nil {
		m.ServiceCount = map[string]int{}
	}
	m.ServiceCount[r.Service]++
	m.counted(r.Service, 1)
	m.touch()
}

// Unassign undoes Assign (for what-if simulations).
func Unassign(m *Machine, r Replica, gpus []int) {
	m.own()
	req := r.Requests
	req.GPUs = len(gpus)
	m.Allocated = m.Allocated.Sub(req)
	for _, idx := range gpus {
		for i := range m.GPUs {
			if m.GPUs[i].Index == idx {
				m.GPUs[i].Used = false
			}
		}
	}
	if m.ServiceCount[r.Service]--; m.ServiceCount[r.Service] <= 0 {
		delete(m.ServiceCount, r.Service)
	}
	m.counted(r.Service, -1)
	m.touch()
}

// Rebook books a replica back on a machine of the session (a what-if
// undone): as Assign, and the machine counts again among the service's
// hosts, which spread rules count from (a machine whose replicas were
// booked back with Assign alone was missing from them, and a zone
// spread counted too few in its zone).
func (s *Session) Rebook(m *Machine, r Replica, gpus []int) { s.st.book(m, &r, gpus) }

// Exclude keeps a machine out of the session's placements (a what-if that
// empties it), or lets it back in.
func (s *Session) Exclude(m *Machine, excluded bool) {
	m.excluded = excluded
	m.touch()
}

type class struct {
	replicas []Replica
}

type classKey struct {
	service, cluster string
	requests         api.Resources
}

func byIndexAndID(a, b Replica) int {
	if a.Index != b.Index { // not cmp.Or, which compares the ids too
		return cmp.Compare(a.Index, b.Index)
	}
	return strings.Compare(a.ID, b.ID)
}

// inIndexOrder sorts a class's replicas by index, then id. A service's
// replicas are numbered from 0, so their indexes are mostly distinct and
// dense: each is then put in its index's place, not sorted (a fleet's
// launch has classes of thousands each pass, listed by id, which is not
// by index: 10 before 9).
func inIndexOrder(rs []Replica) {
	if len(rs) < 2 || slices.IsSortedFunc(rs, byIndexAndID) {
		return
	}
	lo, hi := rs[0].Index, rs[0].Index
	for _, r := range rs {
		lo, hi = min(lo, r.Index), max(hi, r.Index)
	}
	if lo < 0 || hi-lo >= 4*len(rs) {
		slices.SortFunc(rs, byIndexAndID)
		return
	}
	slot := make([]int32, hi-lo+1) // 1 + the position of the replica of that index (0: none)
	for i, r := range rs {
		if slot[r.Index-lo] != 0 { // indexes repeat: the ids decide
			slices.SortFunc(rs, byIndexAndID)
			return
		}
		slot[r.Index-lo] = int32(i + 1)
	}
	to := make([]int32, len(rs)) // where each replica goes
	next := int32(0)
	for _, s := range slot {
		if s != 0 {
			to[s-1] = next
			next++
		}
	}
	for i := range rs { // each cycle of the permutation, swapped into place
		for int(to[i]) != i {
			j := to[i]
			rs[i], rs[j] = rs[j], rs[i]
			to[i], to[j] = to[j], to[i]
		}
	}
}

// classesOf groups replicas by service and orders classes for placement:
// priority, then largest first (first-fit decreasing packs better), then
// name.
func classesOf(pending []Replica, demand api.Resources) []*class {
	out := groupClasses(pending)
	for _, c := range out {
		inIndexOrder(c.replicas)
	}
	slices.SortStableFunc(out, func(a, b *class) int {
		switch {
		case classBefore(&a.replicas[0], &b.replicas[0]):
			return -1
		case classBefore(&b.replicas[0], &a.replicas[0]):
			return 1
		}
		return 0
	})
	if demand.MilliCPU > 0 && demand.MemoryBytes > 0 {
		out = interleave(out, demand)
	}
	return out
}

// groupClasses groups pending by class, in the order each class first
// appears, the replicas of each in theirs: a class's replicas are found
// first and then copied once into one array (at 10,000 machines a
// fleet's launch holds tens of thousands waiting, and growing each
// class's list as it was found was most of the grouping).
func groupClasses(pending []Replica) []*class {
	byKey := map[classKey]int{}
	classOf := make([]int32, len(pending))
	var counts []int
	last, lastClass := classKey{}, -1
	for i := range pending {
		r := &pending[i]
		k := classKey{r.Service, r.Cluster, r.Requests}
		if lastClass < 0 || k != last { // a service's replicas come in runs
			c, ok := byKey[k]
			if !ok {
				c = len(counts)
				byKey[k] = c
				counts = append(counts, 0)
			}
			last, lastClass = k, c
		}
		classOf[i] = int32(lastClass)
		counts[lastClass]++
	}
	all := make([]Replica, len(pending))
	out := make([]*class, len(counts))
	start := 0
	for c, n := range counts {
		out[c] = &class{replicas: all[start : start : start+n]}
		start += n
	}
	for i, c := range classOf {
		out[c].replicas = append(out[c].replicas, pending[i])
	}
	return out
}

// interleave reorders each priority level by shape, alternating the most
// memory-heavy and the most CPU-heavy classes left.
func interleave(classes []*class, demand api.Resources) []*class {
	shape := func(c *class) float64 {
		r := c.replicas[0].Requests
		return float64(r.MilliCPU)/float64(demand.MilliCPU) - float64(r.MemoryBytes)/float64(demand.MemoryBytes)
	}
	out := make([]*class, 0, len(classes))
	for start := 0; start < len(classes); {
		end := start
		for end < len(classes) && classes[end].replicas[0].Priority == classes[start].replicas[0].Priority {
			end++
		}
		// Replicas that follow others stay after them (classBefore).
		var leaders, followers []*class
		for _, c := range classes[start:end] {
			if followsOthers(c.replicas[0]) {
				followers = append(followers, c)
			} else {
				leaders = append(leaders, c)
			}
		}
		for _, level := range [][]*class{leaders, followers} {
			shapes := make(map[*class]float64, len(level))
			for _, c := range level {
				shapes[c] = shape(c)
			}
			slices.SortStableFunc(level, func(a, b *class) int { return cmp.Compare(shapes[a], shapes[b]) })
			for lo, hi := 0, len(level)-1; lo <= hi; lo, hi = lo+1, hi-1 {
				out = append(out, level[lo])
				if lo != hi {
					out = append(out, level[hi])
				}
			}
		}
		start = end
	}
	return out
}

func classBefore(a, b *Replica) bool {
	if a.Priority != b.Priority {
		return a.Priority > b.Priority
	}
	// Replicas that follow others go after them, so that one pass places
	// both.
	if fa, fb := followsOthers(*a), followsOthers(*b); fa != fb {
		return fb
	}
	if a.Requests.MilliCPU != b.Requests.MilliCPU {
		return a.Requests.MilliCPU > b.Requests.MilliCPU
	}
	if a.Requests.MemoryBytes != b.Requests.MemoryBytes {
		return a.Requests.MemoryBytes > b.Requests.MemoryBytes
	}
	if a.Service != b.Service {
		return a.Service < b.Service
	}
	return a.Cluster < b.Cluster
}

// followsOthers: a required affinity to replicas it is not one of.
func followsOthers(r Replica) bool {
	for _, t := range r.affinity() {
		if t.Required() && !api.LabelsMatch(r.Labels, t.Selector) {
			return true
		}
	}
	return false
}

// packScore is the mean share of CPU and memory in use: higher is fuller.
func packScore(m *Machine) float64 {
	return (share(m.Allocated.MilliCPU, m.Allocatable.MilliCPU) + share(m.Allocated.MemoryBytes, m.Allocatable.MemoryBytes)) / 2
}

func share(used, total int64) float64 {
	if total <= 0 {
		return 1
	}
	return float64(used) / float64(total)
}
