package sim

import (
	"slices"
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
// once). A bound is planned beside the run, on a copy of the demand:
// the run goes on, and the ledger accounts for the bound's time once its
// value is known (boundValue).
type bounder struct {
	every   time.Duration
	next    time.Time
	changed bool
	memo    map[string]*boundValue
}

func newBounder(every time.Duration, start time.Time) *bounder {
	return &bounder{every: every, next: start, changed: true, memo: map[string]*boundValue{}}
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
		bound = planBound(r, now)
		b.memo[key] = bound
	}
	r.ledger.boundBy(bound)
}

// boundValue is a bound being planned, and its value once done.
type boundValue struct {
	done  chan struct{}
	value float64
}

// known reports whether the value is planned, without waiting.
func (v *boundValue) known() bool {
	select {
	case <-v.done:
		return true
	default:
		return false
	}
}

// wait is the value, once planned.
func (v *boundValue) wait() float64 {
	<-v.done
	return v.value
}

// planBound plans the bound of the run's demand now on another
// goroutine, from its own copy of what the run changes as it goes on:
// the list of services (a trace row replaces one; a service itself is
// never changed in place) and, when spot prices change, the catalogs'
// offerings (repriced in place).
func planBound(r *run, now time.Time) *boundValue {
	s := r.w.Snap
	scratch := &decide.Snapshot{Clusters: s.Clusters, Services: slices.Clone(s.Services), Catalogs: s.Catalogs, Providers: s.Providers}
	if len(r.setup.SpotPrices) > 0 {
		scratch.Catalogs = cloneCatalogs(s.Catalogs)
	}
	cfg := r.cfg
	cfg.Planner.SkipBound = false
	v := &boundValue{done: make(chan struct{})}
	go func() {
		defer close(v.done)
		v.value = decide.Decide(cfg, scratch, decide.NewMemory(), now).Capacity.LowerBound
	}()
	return v
}

// cloneCatalogs copies catalogs down to their offerings, which a run's
// spot price changes reprice in place.
func cloneCatalogs(in map[string]decide.ClusterProvider) map[string]decide.ClusterProvider {
	out := make(map[string]decide.ClusterProvider, len(in))
	for name, cp := range in {
		cp.Catalog = slices.Clone(cp.Catalog)
		for i := range cp.Catalog {
			cp.Catalog[i].Offerings = slices.Clone(cp.Catalog[i].Offerings)
		}
		out[name] = cp
	}
	return out
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
