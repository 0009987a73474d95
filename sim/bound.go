package sim

import (
	"strconv"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/decide"
	"github.com/gantry-dev/gantry/spec"
)

// bounder plans the demand of the time from scratch, on no machine, now
// and then, for the lower bound of what it could cost: the planner's LP
// relaxation over the allowed types. It plans again only when the demand
// changed, at most once per interval, and remembers the bound of each
// demand it planned (demand that comes back, day after day, is planned
// once).
type bounder struct {
	every   time.Duration
	next    time.Time
	changed bool
	memo    map[string]float64
}

func newBounder(every time.Duration, start time.Time) *bounder {
	return &bounder{every: every, next: start, changed: true, memo: map[string]float64{}}
}

func (b *bounder) demandChanged() { b.changed = true }

// due is when the bound is planned next (zero: not until the demand
// changes).
func (b *bounder) due() time.Time {
	if b.every <= 0 || !b.changed {
		return time.Time{}
	}
	return b.next
}

// sample plans the bound if it is due.
func (b *bounder) sample(now time.Time, r *run) {
	if b.every <= 0 || !b.changed || now.Before(b.next) {
		return
	}
	b.changed, b.next = false, now.Add(b.every)
	key := demandKey(r.w.Snap) + "prices" + strconv.Itoa(r.price)
	bound, ok := b.memo[key]
	if !ok {
		s := r.w.Snap
		scratch := &decide.Snapshot{Clusters: s.Clusters, Services: s.Services, Catalogs: s.Catalogs, Providers: s.Providers}
		bound = decide.Decide(r.cfg, scratch, decide.NewMemory(), now).Capacity.LowerBound
		b.memo[key] = bound
	}
	r.ledger.bound = bound
}

// demandKey is what the bound depends on: every service's replicas and
// what each asks for.
func demandKey(s *decide.Snapshot) string {
	var sb strings.Builder
	for _, svc := range s.Services {
		sb.WriteString(svc.Metadata.Name)
		sb.WriteByte('=')
		sb.WriteString(spec.RevisionHash(svc.Spec, nil))
		sb.WriteByte('x')
		if svc.Spec.Replicas != nil {
			sb.WriteString(strconv.Itoa(*svc.Spec.Replicas))
		}
		sb.WriteByte(';')
	}
	return sb.String()
}
