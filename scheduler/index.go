package scheduler

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/gantry-dev/gantry/api"
)

// fitIndex finds, in a list of machines kept in pass order, the first one
// at or after a position with enough free CPU, memory and ephemeral
// storage: a segment tree of each range's largest free amounts. A search
// skips whole ranges where no machine has enough of one resource, so a
// first-fit pick costs about log(machines) instead of a walk past every
// full machine. The tree is a hint: pickers still check the machine.
type fitIndex struct {
	machines []*Machine
	leaves   int
	// cpu, mem and eph hold per node the largest free amount below it
	// (node 1 is the root; leaves start at index leaves).
	cpu, mem, eph []int64
	// apart, when set, counts on each machine the replicas its class
	// keeps apart from; the index counts a machine that runs any as full.
	apart *apartCounts
}

// apartCounts are an apart index's counts, by position, of the replicas
// of the services its class keeps apart from, kept as bookings change
// them (Machine.counted): a booking does not walk the machine's services.
type apartCounts struct {
	keeps  func(service string) bool
	memo   map[string]bool
	counts []int
	// epoch is the state's labelsEpoch the counts were made at: labels
	// learnt later may change what keeps says.
	epoch int
}

func (a *apartCounts) keepsFrom(service string) bool {
	v, ok := a.memo[service]
	if !ok {
		v = a.keeps(service)
		a.memo[service] = v
	}
	return v
}

func (a *apartCounts) countOn(m *Machine) int {
	n := 0
	for svc, c := range m.ServiceCount {
		if c > 0 && a.keepsFrom(svc) {
			n += c
		}
	}
	return n
}

// counted notes in the machine's apart indexes a booking (delta 1) or
// its undoing (-1) of a replica of service, before its touch.
func (m *Machine) counted(service string, delta int) {
	for _, s := range m.slots {
		if a := s.index.apart; a != nil && s.pos < len(s.index.machines) && s.index.machines[s.pos] == m && a.keepsFrom(service) {
			a.counts[s.pos] += delta
		}
	}
}

// slot is a machine's place in one index, so that a booking updates it.
type slot struct {
	index *fitIndex
	pos   int
}

func newFitIndex(machines []*Machine) *fitIndex { return newApartIndex(machines, nil) }

// newApartIndex indexes machines: their leaves, then the inner nodes
// once, bottom up (adding them one by one refreshed a path to the root
// for each: a twentieth of a steady pass at 10,000 machines).
func newApartIndex(machines []*Machine, apart *apartCounts) *fitIndex {
	x := &fitIndex{apart: apart, machines: make([]*Machine, len(machines))}
	copy(x.machines, machines)
	for pos, m := range machines {
		if apart != nil {
			apart.counts = append(apart.counts, apart.countOn(m))
		}
		m.slots = append(m.slots, slot{index: x, pos: pos})
	}
	x.grow(max(len(machines), 1))
	return x
}

// grow makes room for at least n leaves and rebuilds the inner nodes.
func (x *fitIndex) grow(n int) {
	leaves := 1
	for leaves < n {
		leaves *= 2
	}
	x.leaves = leaves
	x.cpu, x.mem, x.eph = make([]int64, 2*leaves), make([]int64, 2*leaves), make([]int64, 2*leaves)
	for i := range x.cpu {
		x.cpu[i], x.mem[i], x.eph[i] = -1, -1, -1
	}
	for pos, m := range x.machines {
		x.setLeaf(pos, m)
	}
	for i := leaves - 1; i >= 1; i-- {
		x.pull(i)
	}
}

// add appends a machine (opened during the pass).
func (x *fitIndex) add(m *Machine) {
	pos := len(x.machines)
	x.machines = append(x.machines, m)
	if x.apart != nil {
		x.apart.counts = append(x.apart.counts, x.apart.countOn(m))
	}
	m.slots = append(m.slots, slot{index: x, pos: pos})
	if pos >= x.leaves {
		x.grow(pos + 1)
		return
	}
	x.update(pos)
}

func (x *fitIndex) setLeaf(pos int, m *Machine) {
	i := x.leaves + pos
	if m.excluded || x.apart != nil && x.apart.counts[pos] > 0 {
		x.cpu[i], x.mem[i], x.eph[i] = -1, -1, -1
		return
	}
	free := m.Free()
	x.cpu[i], x.mem[i], x.eph[i] = free.MilliCPU, free.MemoryBytes, free.EphemeralBytes
}

func (x *fitIndex) pull(i int) {
	x.cpu[i] = max(x.cpu[2*i], x.cpu[2*i+1])
	x.mem[i] = max(x.mem[2*i], x.mem[2*i+1])
	x.eph[i] = max(x.eph[2*i], x.eph[2*i+1])
}

// update refreshes a machine's free resources after a booking.
func (x *fitIndex) update(pos int) {
	x.setLeaf(pos, x.machines[pos])
	for i := (x.leaves + pos) / 2; i >= 1; i /= 2 {
		x.pull(i)
	}
}

// first is the position of the first machine at or after from with room
// for req, or -1.
func (x *fitIndex) first(from int, req api.Resources) int {
	if from >= len(x.machines) {
		return -1
	}
	return x.search(1, 0, x.leaves, from, req)
}

func (x *fitIndex) search(node, lo, hi, from int, req api.Resources) int {
	if hi <= from || x.cpu[node] < req.MilliCPU || x.mem[node] < req.MemoryBytes || x.eph[node] < req.EphemeralBytes {
		return -1
	}
	if hi-lo == 1 {
		return lo
	}
	mid := (lo + hi) / 2
	if found := x.search(2*node, lo, mid, from, req); found >= 0 {
		return found
	}
	return x.search(2*node+1, mid, hi, from, req)
}

// touch refreshes every index the machine is in.
func (m *Machine) touch() {
	for _, s := range m.slots {
		if s.pos < len(s.index.machines) && s.index.machines[s.pos] == m {
			s.index.update(s.pos)
		}
	}
}

// eligibleSet is the machines one static need may use (same cluster,
// groups, runtime, node selector, TEE and GPU kind), in pass order, with
// fit indexes over all of them and per zone, made on first use and shared
// by every class with that need.
type eligibleSet struct {
	sample   Replica
	machines []*Machine
	all      *fitIndex
	zones    map[string]*fitIndex
	// apart are fit indexes that count as full the machines a class
	// keeps apart from (apartOnMachines), by zone ("": all) and what it
	// keeps apart from.
	apart map[apartKey]*fitIndex
	// zoneList are the zones of its machines, in order of appearance.
	zoneList []string
	hasZone  map[string]bool
}

// staticKey names what staticFit looks at.
func staticKey(r *Replica) string {
	var b strings.Builder
	b.WriteString(r.Cluster)
	b.WriteByte(0)
	b.WriteString(strings.Join(r.Groups, ","))
	b.WriteByte(0)
	b.WriteString(r.Runtime)
	b.WriteByte(0)
	keys := make([]string, 0, len(r.NodeSelector))
	for k := range r.NodeSelector {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		b.WriteString(k + "=" + r.NodeSelector[k] + ",")
	}
	b.WriteByte(0)
	if r.Isolation == api.IsolationTEERequired {
		b.WriteString("tee")
	}
	if r.GPU != nil && !r.GPU.Preferred {
		fmt.Fprintf(&b, "\x00gpu %d %s %g", r.GPU.Count, r.GPU.Type, r.GPU.MinVRAMGB)
	}
	return b.String()
}

func (st *state) eligibleFor(r *Replica) *eligibleSet {
	key := staticKey(r)
	if set, ok := st.sets[key]; ok {
		return set
	}
	in := st.byCluster[r.Cluster]
	// Room for all of them: most machines fit most classes.
	set := &eligibleSet{sample: *r, zones: map[string]*fitIndex{}, hasZone: map[string]bool{}, machines: make([]*Machine, 0, len(in))}
	for _, m := range in {
		if staticFit(m, r) == "" {
			set.machines = append(set.machines, m)
			set.noteZone(m.Zone)
		}
	}
	st.sets[key] = set
	return set
}

const zonesSearched = 8

func (s *eligibleSet) noteZone(z string) {
	// A fleet has a few zones: the list is searched, not the map hashed
	// for each of 10,000 machines (past a few, the map).
	if len(s.zoneList) <= zonesSearched && slices.Contains(s.zoneList, z) || len(s.zoneList) > zonesSearched && s.hasZone[z] {
		return
	}
	s.hasZone[z] = true
	s.zoneList = append(s.zoneList, z)
}

func (s *eligibleSet) add(m *Machine) {
	s.machines = append(s.machines, m)
	s.noteZone(m.Zone)
	if s.all != nil {
		s.all.add(m)
	}
	if z, ok := s.zones[m.Zone]; ok {
		z.add(m)
	}
	for k, x := range s.apart {
		if k.zone == "" || k.zone == m.Zone {
			x.add(m)
		}
	}
}

// apartKey names an apart index: its zone and what its class keeps
// apart from.
type apartKey struct{ zone, from string }

// apartIndex is the fit index over the set's machines (or those in
// zone) that counts as full every machine apart.blocked says runs what a
// class keeps apart from: a class that keeps one per machine finds a
// machine free of it in log(machines), not by skipping past every
// machine that runs it (a what-if that moves one replica of a tier of
// 4,000 walked 4,000 machines).
func (s *eligibleSet) apartIndex(zone string, a apart, epoch int) *fitIndex {
	k := apartKey{zone, a.key}
	if x, ok := s.apart[k]; ok && x.apart.epoch == epoch {
		return x
	}
	var in []*Machine
	for _, m := range s.machines {
		if zone == "" || m.Zone == zone {
			in = append(in, m)
		}
	}
	if s.apart == nil {
		s.apart = map[apartKey]*fitIndex{}
	}
	x := newApartIndex(nil, &apartCounts{keeps: a.keeps, memo: map[string]bool{}, epoch: epoch})
	for _, m := range in {
		x.add(m)
	}
	s.apart[k] = x
	return x
}

// index is the fit index over the set's machines, or over those in zone.
func (s *eligibleSet) index(zone string) *fitIndex {
	if zone == "" {
		if s.all == nil {
			s.all = newFitIndex(s.machines)
		}
		return s.all
	}
	if z, ok := s.zones[zone]; ok {
		return z
	}
	var in []*Machine
	for _, m := range s.machines {
		if m.Zone == zone {
			in = append(in, m)
		}
	}
	z := newFitIndex(in)
	s.zones[zone] = z
	return z
}
