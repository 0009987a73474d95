package planner

import (
	"cmp"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/gantry-dev/gantry/api"
)

// fleetMemo is what the looks' walks read of each machine, kept in the
// scratch from one look to the next (Input.MachineIDs): a look reads
// again only the machines its caller noted as changed since the last
// (Scratch.NoteMachineChanged), those it had not read, and the empty
// ones, whose idle time counts as the clock runs; the rest it takes as
// the last look read them. A look that read every machine (walkFleet)
// was, at 10,000 machines, a cache miss or more for each, while between
// two looks a pass changes a few dozen of them.
type fleetMemo struct {
	known bool
	// The look the records hold for: its groups, in order, its catalog
	// (the offerings a cheaper machine may be, catalogSig) and savings
	// floor (cheaper).
	groupKeys []groupKey
	catalog   []offeringSig
	floor     float64
	// ids, recs and prices are by place: the machines' ids, what was
	// read of each (read: it was) and its price.
	ids    []string
	recs   []memoRec
	prices []float64
	// empty are the places of the records of machines without replicas.
	empty []int32
	// The clusters and groups the records name, and what their records
	// add up to.
	clusters  []string
	clusterAt map[string]int32
	groups    []groupKey
	groupAt   map[groupKey]int32
	byCluster []clusterSums
	byGroup   []groupSums
	// changed are the ids noted since the last look; forgotten: the
	// caller could not say what changed, and the next look reads all.
	changed   map[string]bool
	forgotten bool
	// reads counts the records the last look read, and partly the looks
	// that read fewer than all (tests).
	reads, partly int
	// Scratch of the update, kept: the places to read and the records
	// moved when the machines' places moved.
	places  []int32
	unread  []int32 // the places align left without a record
	moved   []memoRec
	movedTo []float64
}

// memoRec is what a look reads of a machine, without a pointer (the
// collector does not scan the records): its cluster's and group's place
// in the memo, its replicas, room and price, its age (as seconds and
// nanoseconds, After's terms) and whether it joined, may not be
// disrupted, has GPUs, has nothing allocated (bare) and whether a
// cheaper offering of its group holds it (cheaper).
type memoRec struct {
	cluster, group                   int32
	replicas                         int32
	createdNsec                      int32
	createdSec                       int64
	price                            float64
	free, used                       api.Resources
	read, joined, doNotDisrupt, gpus bool
	bare, cheaper                    bool
}

type clusterSums struct {
	free, busyFree          api.Resources
	overcommitted, unjoined int
}

type groupSums struct{ live, idle, bare int }

// offeringSig is what cheaperThan reads of an offering: its group (and
// the group's place in the input, which tells duplicates apart), zone,
// room and price.
type offeringSig struct {
	group groupKey
	slot  int
	zone  string
	alloc api.Resources
	price float64
}

// NoteMachineChanged tells the next look that the machine of id may
// have changed since the last: it reads it again. A caller that hands
// the planner its machines' ids (Input.MachineIDs) notes every machine
// it changed, made or booked afresh since its last plan, or forgets
// them all (ForgetMachines).
func (s *Scratch) NoteMachineChanged(id string) {
	m := &s.memo
	if !m.known || m.forgotten {
		return
	}
	if m.changed == nil {
		m.changed = map[string]bool{}
	}
	m.changed[id] = true
	if len(m.changed) > len(m.recs) { // no look took them for long (none looks, or none walks): all are read
		m.forgotten = true
		clear(m.changed)
	}
}

// ForgetMachines tells the next look that its caller cannot say which
// machines changed: it reads every one.
func (s *Scratch) ForgetMachines() { s.memo.forgotten = true }

// MemoReads is how many machines the last look read (tests).
func (s *Scratch) MemoReads() int { return s.memo.reads }

// LooksFromRecords counts the looks that read fewer than every machine
// (tests).
func (s *Scratch) LooksFromRecords() int { return s.memo.partly }

// usesMemo: the look may take the records of the last look's walk for
// the machines not noted since.
func (p *planning) usesMemo() bool {
	in := p.in
	return in.Scratch != nil && in.MachinesByID && in.MachineIDs != nil && len(in.MachineIDs) == len(in.Machines) && !p.noShortcuts
}

// walkFleetMemo is walkFleet's look (weigh is not nil), from the records
// of the last look, brought up to date.
func (p *planning) walkFleetMemo() *fleetWalk {
	m := &p.in.Scratch.memo
	groupKeys, catalog := p.lookKeys()
	if !m.known || m.forgotten || m.floor != p.cfg.SavingsFloor || !slices.Equal(m.groupKeys, groupKeys) || !slices.Equal(m.catalog, catalog) {
		m.reset(groupKeys, catalog, p.cfg.SavingsFloor)
	}
	m.align(p.in.MachineIDs)
	m.readChanged(p)
	return p.walkOf(m)
}

// lookKeys are the look's groups and the catalog cheaperThan reads,
// which the records' group places and their cheaper hold for.
func (p *planning) lookKeys() ([]groupKey, []offeringSig) {
	keys := make([]groupKey, len(p.in.Groups))
	slots := make(map[*Group]int, len(p.in.Groups))
	for i, g := range p.in.Groups {
		keys[i], slots[g] = groupKey{g.Cluster, g.ID}, i
	}
	var sig []offeringSig
	for _, list := range p.catalog.plain {
		for _, c := range list {
			sig = append(sig, offeringSig{groupKey{c.group.Cluster, c.group.ID}, slots[c.group], c.offering.Zone, c.alloc, c.offering.PricePerHour})
		}
	}
	slices.SortFunc(sig, func(a, b offeringSig) int {
		return cmp.Or(cmp.Compare(a.slot, b.slot), strings.Compare(a.zone, b.zone), cmp.Compare(a.price, b.price), cmp.Compare(a.alloc.MilliCPU, b.alloc.MilliCPU),
			cmp.Compare(a.alloc.MemoryBytes, b.alloc.MemoryBytes), cmp.Compare(a.alloc.EphemeralBytes, b.alloc.EphemeralBytes),
			cmp.Compare(a.alloc.GPUs, b.alloc.GPUs))
	})
	return keys, sig
}

// reset drops every record: the next update reads every machine.
func (m *fleetMemo) reset(groupKeys []groupKey, catalog []offeringSig, floor float64) {
	*m = fleetMemo{known: true, groupKeys: groupKeys, catalog: catalog, floor: floor,
		recs: m.recs[:0], prices: m.prices[:0], empty: m.empty[:0], places: m.places[:0], unread: m.unread[:0], moved: m.moved, movedTo: m.movedTo,
		clusterAt: map[string]int32{}, groupAt: map[groupKey]int32{}}
}

// align puts the records at the places of ids, the machines of this
// look (both lists by id): a machine gone takes its record out of the
// sums, a machine new has none yet (unread). The same ids are compared
// by their bytes' address first (a caller's ids, kept while its
// machines are, are the same strings): a look whose machines stayed
// compares no bytes.
func (m *fleetMemo) align(ids []string) {
	if slices.Equal(ids, m.ids) {
		return
	}
	recs, prices := sized(&m.moved, len(ids)), sized(&m.movedTo, len(ids))
	m.unread = m.unread[:0]
	to := make([]int32, len(m.ids))
	i := 0
	for j, id := range ids {
		for i < len(m.ids) && m.ids[i] != id && m.ids[i] < id {
			m.forget(i) // gone
			to[i] = -1
			i++
		}
		if i < len(m.ids) && m.ids[i] == id {
			recs[j], prices[j], to[i] = m.recs[i], m.prices[i], int32(j)
			i++
			continue
		}
		recs[j], prices[j] = memoRec{}, 0
		m.unread = append(m.unread, int32(j))
	}
	for ; i < len(m.ids); i++ {
		m.forget(i)
		to[i] = -1
	}
	empty := m.empty[:0]
	for _, k := range m.empty {
		if to[k] >= 0 {
			empty = append(empty, to[k])
		}
	}
	m.empty = empty
	m.moved, m.recs = m.recs, recs
	m.movedTo, m.prices = m.prices, prices
	m.ids = append(m.ids[:0], ids...)
}

// forget takes the record at place i out of the sums, if it was read.
func (m *fleetMemo) forget(i int) {
	if m.recs[i].read {
		m.account(&m.recs[i], false)
	}
}

// readChanged reads again the machines noted since the last look, those
// not read yet and the empty ones.
func (m *fleetMemo) readChanged(p *planning) {
	places := append(m.places[:0], m.empty...)
	for id := range m.changed {
		if j, ok := slices.BinarySearch(m.ids, id); ok {
			places = append(places, int32(j))
		}
	}
	places = append(places, m.unread...)
	m.unread = m.unread[:0]
	slices.Sort(places)
	places = slices.Compact(places)
	var last holding
	empty := m.empty[:0]
	for _, j := range places {
		m.read(p, j, &last)
		if m.recs[j].replicas == 0 {
			empty = append(empty, j)
		}
	}
	m.empty, m.places, m.reads = empty, places, len(places)
	if len(places) < len(m.recs) {
		m.partly++
	}
	clear(m.changed)
	m.forgotten = false
}

// read reads the machine at place j into its record.
func (m *fleetMemo) read(p *planning, j int32, last *holding) {
	pm := p.in.Machines[j]
	if old := &m.recs[j]; old.read {
		m.account(old, false)
	}
	r := memoRec{cluster: m.clusterOf(pm.Cluster), group: m.groupOf(groupKey{pm.Cluster, pm.Group}), replicas: int32(len(pm.Replicas)),
		createdSec: pm.CreatedAt.Unix(), createdNsec: int32(pm.CreatedAt.Nanosecond()), price: pm.PricePerHour,
		read: true, joined: pm.Joined, doNotDisrupt: pm.DoNotDisrupt, gpus: len(pm.GPUs) > 0, bare: pm.Allocated.MilliCPU == 0}
	r.free, r.used = pm.Free(), usedOf(pm.Machine)
	if slot := m.slotOf(r.group); pm.Joined && slot >= 0 && !r.gpus {
		r.cheaper = p.cheaperThan(last.of(p.catalog, pm.Machine, p.in.Groups[slot]), pm.Machine) != nil
	}
	m.recs[j], m.prices[j] = r, pm.PricePerHour
	m.account(&m.recs[j], true)
}

// slotOf is the group's place in the look's groups (the last of a key's
// duplicates; -1: none).
func (m *fleetMemo) slotOf(group int32) int32 {
	key := m.groups[group]
	for i := len(m.groupKeys) - 1; i >= 0; i-- {
		if m.groupKeys[i] == key {
			return int32(i)
		}
	}
	return -1
}

func (m *fleetMemo) clusterOf(name string) int32 {
	return placeOf(name, m.clusterAt, &m.clusters, &m.byCluster)
}

func (m *fleetMemo) groupOf(key groupKey) int32 {
	return placeOf(key, m.groupAt, &m.groups, &m.byGroup)
}

// placeOf is key's place in *keys (and in *sums, side by side), added
// at the end when new.
func placeOf[K comparable, S any](key K, at map[K]int32, keys *[]K, sums *[]S) int32 {
	if i, ok := at[key]; ok {
		return i
	}
	var none S
	*keys, *sums = append(*keys, key), append(*sums, none)
	at[key] = int32(len(*keys) - 1)
	return at[key]
}

// account adds the record into its cluster's and group's sums, or takes
// it out of them.
func (m *fleetMemo) account(r *memoRec, in bool) {
	sign := 1
	if !in {
		sign = -1
	}
	c, g := &m.byCluster[r.cluster], &m.byGroup[r.group]
	g.live += sign
	if r.replicas == 0 {
		g.idle += sign
		if r.bare {
			g.bare += sign
		}
	}
	if !r.joined {
		c.unjoined += sign
		return
	}
	if r.free.MilliCPU < 0 || r.free.MemoryBytes < 0 || r.free.EphemeralBytes < 0 {
		c.overcommitted += sign
	}
	busy := api.Resources{}
	if r.replicas > 0 {
		busy = noneBelowZero(r.free)
	}
	if in {
		c.free, c.busyFree = c.free.Add(r.free), c.busyFree.Add(busy)
	} else {
		c.free, c.busyFree = c.free.Sub(r.free), c.busyFree.Sub(busy)
	}
}

// walkOf is the walk the records add up to, as walkFleet finds it.
func (p *planning) walkOf(m *fleetMemo) *fleetWalk {
	w := &fleetWalk{slots: make(map[groupKey]int32, len(p.in.Groups)), counts: make([]groupCount, len(p.in.Groups)),
		free: map[string]api.Resources{}, overcommitted: map[string]bool{}, busyFree: map[string]api.Resources{},
		cheapestEmpty: map[string]float64{}, memo: m, prices: m.prices}
	for i, g := range p.in.Groups {
		w.slots[groupKey{g.Cluster, g.ID}] = int32(i)
		w.counts[i] = groupCount{group: g, stopped: g.Stopped}
	}
	w.memoSlots = make([]int32, len(m.groups))
	for gi, key := range m.groups {
		slot, ok := w.slots[key]
		if !ok {
			slot = -1
		}
		w.memoSlots[gi] = slot
		if slot >= 0 {
			c, s := &w.counts[slot], m.byGroup[gi]
			c.live, c.idle, c.bare = c.live+s.live, c.idle+s.idle, c.bare+s.bare
		}
	}
	for ci, s := range m.byCluster {
		name := m.clusters[ci]
		if s.free != (api.Resources{}) {
			w.free[name] = s.free
		}
		if s.busyFree != (api.Resources{}) {
			w.busyFree[name] = s.busyFree
		}
		if s.overcommitted > 0 {
			w.overcommitted[name] = true
		}
		if s.unjoined > 0 {
			if w.unjoined == nil {
				w.unjoined = map[string]bool{}
			}
			w.unjoined[name] = true
		}
	}
	for _, j := range m.empty {
		r, pm := &m.recs[j], p.in.Machines[j]
		if slot := w.memoSlots[r.group]; slot >= 0 && p.idleLongEnough(pm) {
			w.counts[slot].settled++
		}
		if r.joined {
			name := m.clusters[r.cluster]
			if least, ok := w.cheapestEmpty[name]; !ok || r.price < least {
				w.cheapestEmpty[name] = r.price
			}
		}
	}
	for _, price := range m.prices {
		w.costBefore += price // in the machines' order, as walkFleet sums
	}
	return w
}

// eachEligible calls keep with every machine consolidation may weigh, by
// place, as the weigher reads them.
func (w *fleetWalk) eachEligibleInMemo(p *planning, keep func(*eligible)) {
	m := w.memo
	madeBy := p.in.Now.Add(-p.cfg.MinLifetime)
	sec, nsec := madeBy.Unix(), int32(madeBy.Nanosecond())
	e := new(eligible) // one for every machine: keep may not hold it
	for j := range m.recs {
		r := &m.recs[j]
		if !r.joined || r.doNotDisrupt || r.replicas > 0 && createdAfter(r.createdSec, r.createdNsec, sec, nsec) {
			continue
		}
		*e = eligible{keyed: keyed{removable{p.in.Machines[j], w.memoSlots[r.group], int32(j)}, int(r.replicas), r.price, m.ids[j]},
			cluster: m.clusters[r.cluster], need: r.free.Add(r.used), used: r.used, gpus: r.gpus, cheaper: r.cheaper}
		keep(e)
	}
}

// createdAfter is time.Time.After on (seconds, nanoseconds) pairs.
func createdAfter(sec int64, nsec int32, bySec int64, byNsec int32) bool {
	return sec > bySec || sec == bySec && nsec > byNsec
}

// walksDiffer says how the walk a look made from its records differs
// from one of every machine (empty: it does not).
func walksDiffer(p *planning, fromRecords, walked *fleetWalk) string {
	a, b := *fromRecords, *walked
	var taken []eligible
	a.eachEligibleInMemo(p, func(e *eligible) { taken = append(taken, *e) })
	if !slices.Equal(taken, b.eligible) {
		return fmt.Sprintf("eligible machines\n%+v\nwalking\n%+v", taken, b.eligible)
	}
	a.memo, a.memoSlots, a.eligible, b.eligible = nil, nil, nil, nil
	if !reflect.DeepEqual(a, b) {
		return fmt.Sprintf("from the records\n%+v\nwalking every machine\n%+v", a, b)
	}
	return ""
}
