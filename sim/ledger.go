package sim

import (
	"sort"
	"time"

	"github.com/gantry-dev/gantry/api"
)

// ledger accounts for a run as the time moves: what the billed instances
// cost, machine-hours by type and capacity type, replicas waiting, and the
// series the plot draws.
type ledger struct {
	start, end time.Time
	bucket     time.Duration
	// billed are the instances billed now, by machine.
	billed map[string]billing
	// rate is what the billed instances cost per hour, together.
	rate float64
	// machines counts the billed instances not paused.
	machines int
	hours    map[typeKey]*typeAccount
	// down are the wanted replicas not running now, since when and why.
	down map[string]downSince
	// bound is the lower bound of the time ($/h), as last planned (nil:
	// none yet); owed is its share of the time since, while its value is
	// not known yet (it is planned beside the run), to add in the order
	// the time passed, as if it had been known all along.
	bound *boundValue
	owed  []boundShare
	// spotPrice are the spot prices a price trace changed, by type and
	// zone: what a spot machine there is billed.
	spotPrice map[spotKey]float64

	cost, boundCost float64
	series          []Point
	episodes        []time.Duration
	spotEpisodes    []time.Duration
	launchFailures  int
}

// boundShare is a span of time the bound is owed for: hours of the
// total, and share of a series' bucket.
type boundShare struct {
	bucket       int
	hours, share float64
}

type typeKey struct{ instanceType, capacityType string }

type spotKey struct{ instanceType, zone string }

// typeAccount is one type and capacity type's machine-hours so far, and
// what its billed instances cost now.
type typeAccount struct {
	TypeHours
	running int
	rate    float64
}

type billing struct {
	key    typeKey
	zone   string
	price  float64
	paused bool
}

type downSince struct {
	at time.Time
	// interrupted: it went down with a spot machine the provider took.
	interrupted bool
}

func newLedger(start, end time.Time) *ledger {
	bucket := end.Sub(start) / maxPoints
	bucket = max(time.Minute, bucket.Round(time.Minute))
	l := &ledger{start: start, end: end, bucket: bucket, billed: map[string]billing{}, hours: map[typeKey]*typeAccount{}, down: map[string]downSince{},
		spotPrice: map[spotKey]float64{}}
	for at := start; at.Before(end); at = at.Add(bucket) {
		l.series = append(l.series, Point{At: at})
	}
	if len(l.series) == 0 {
		l.series = append(l.series, Point{At: start})
	}
	return l
}

// maxPoints bounds the series: a month is drawn by the hour.
const maxPoints = 720

// billFrom starts billing a machine's instance.
func (l *ledger) billFrom(m *api.Machine, _ time.Time) {
	b := billing{key: typeKey{m.InstanceType, m.CapacityType}, zone: m.Zone, price: m.PricePerHour}
	if p, ok := l.spotPrice[spotKey{m.InstanceType, m.Zone}]; ok && m.CapacityType == api.CapacitySpot {
		b.price = p
	}
	l.billed[m.ID] = b
	if l.hours[b.key] == nil {
		l.hours[b.key] = &typeAccount{TypeHours: TypeHours{InstanceType: m.InstanceType, CapacityType: m.CapacityType}}
	}
	l.hours[b.key].Machines++
	l.running(b, +1)
}

// running counts an instance's bill in or out of what is billed now.
func (l *ledger) running(b billing, sign int) {
	l.rate += float64(sign) * b.price
	l.machines += sign
	a := l.hours[b.key]
	a.running += sign
	a.rate += float64(sign) * b.price
}

// billUntil stops billing a machine's instance.
func (l *ledger) billUntil(machine string, _ time.Time) {
	b, ok := l.billed[machine]
	if !ok {
		return
	}
	if !b.paused {
		l.running(b, -1)
	}
	delete(l.billed, machine)
}

// pause and resume bill a warm-pool machine's stop (nothing is billed
// while it is stopped; its disk is not modelled).
func (l *ledger) pause(machine string, paused bool) {
	b, ok := l.billed[machine]
	if !ok || b.paused == paused {
		return
	}
	if paused {
		l.running(b, -1)
	} else {
		l.running(b, +1)
	}
	b.paused = paused
	l.billed[machine] = b
}

func (l *ledger) launchFailed() { l.launchFailures++ }

// reprice bills the spot machines of a type in a zone at a new price
// from now (in the order of their ids, for the same sums every time).
func (l *ledger) reprice(instanceType, zone string, price float64) {
	l.spotPrice[spotKey{instanceType, zone}] = price
	var ids []string
	for id, b := range l.billed {
		if b.key == (typeKey{instanceType, api.CapacitySpot}) && b.zone == zone {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		b := l.billed[id]
		if !b.paused {
			l.running(b, -1)
		}
		b.price = price
		if !b.paused {
			l.running(b, +1)
		}
		l.billed[id] = b
	}
}

// advance accounts for the time from one instant to the next, during
// which nothing changed.
func (l *ledger) advance(from, to time.Time) {
	if to.After(l.end) {
		to = l.end
	}
	if !to.After(from) {
		return
	}
	hours := to.Sub(from).Hours()
	l.cost += l.rate * hours
	l.owe(boundShare{bucket: -1, hours: hours})
	for _, a := range l.hours {
		a.Hours += float64(a.running) * hours
		a.Cost += a.rate * hours
	}
	machines := l.machines
	// Spread over the series' buckets.
	for at := from; at.Before(to); {
		i := min(int(at.Sub(l.start)/l.bucket), len(l.series)-1)
		until := l.start.Add(time.Duration(i+1) * l.bucket)
		if i == len(l.series)-1 || until.After(to) {
			until = to
		}
		share := until.Sub(at).Hours() / l.bucket.Hours()
		p := &l.series[i]
		p.CostPerHour += l.rate * share
		l.owe(boundShare{bucket: i, share: share})
		p.Pending += float64(len(l.down)) * share
		p.Machines += float64(machines) * share
		at = until
	}
}

// boundBy makes bound the lower bound from now on.
func (l *ledger) boundBy(bound *boundValue) {
	l.settle()
	l.bound = bound
}

// owe accounts for the bound over a span of time: at once if its value
// is known, else once it is.
func (l *ledger) owe(s boundShare) {
	switch {
	case l.bound == nil: // nothing planned yet: a bound of 0
	case len(l.owed) == 0 && l.bound.known():
		l.add(s, l.bound.value)
	default:
		l.owed = append(l.owed, s)
		if l.bound.known() {
			l.settle()
		}
	}
}

// settle adds what is owed of the current bound, waiting for its value.
func (l *ledger) settle() {
	if len(l.owed) == 0 {
		return
	}
	bound := l.bound.wait()
	for _, s := range l.owed {
		l.add(s, bound)
	}
	l.owed = l.owed[:0]
}

func (l *ledger) add(s boundShare, bound float64) {
	if s.bucket < 0 {
		l.boundCost += bound * s.hours
	} else {
		l.series[s.bucket].BoundPerHour += bound * s.share
	}
}

// wentDown notes a wanted replica not running from now.
func (l *ledger) wentDown(id string, at time.Time, interrupted bool) {
	if _, ok := l.down[id]; !ok {
		l.down[id] = downSince{at: at, interrupted: interrupted}
	}
}

// cameUp notes a replica running again (or no longer wanted).
func (l *ledger) cameUp(id string, at time.Time) {
	d, ok := l.down[id]
	if !ok {
		return
	}
	delete(l.down, id)
	wait := at.Sub(d.at)
	l.episodes = append(l.episodes, wait)
	if d.interrupted {
		l.spotEpisodes = append(l.spotEpisodes, wait)
	}
}

// typeHours are the machine-hours, by type and capacity type.
func (l *ledger) typeHours() []TypeHours {
	out := make([]TypeHours, 0, len(l.hours))
	for _, a := range l.hours {
		out = append(out, a.TypeHours)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].InstanceType != out[j].InstanceType {
			return out[i].InstanceType < out[j].InstanceType
		}
		return out[i].CapacityType < out[j].CapacityType
	})
	return out
}

// finish closes the episodes still open at the end: a replica still
// waiting has waited until then. It returns how many were.
func (l *ledger) finish() int {
	l.settle()
	ids := make([]string, 0, len(l.down))
	for id := range l.down {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		l.cameUp(id, l.end)
	}
	return len(ids)
}
