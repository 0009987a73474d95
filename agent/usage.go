package agent

import (
	"context"
	"maps"
	"sync"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/runtime"
)

// usageMeter keeps what each running replica uses, measured every
// UsageInterval apart from the heartbeats (a slow measurement never
// delays one), which carry the latest.
type usageMeter struct {
	mu     sync.Mutex
	latest map[string]api.Usage
	// last is each replica's previous sample, its CPU rate's base.
	last map[string]timedSample
}

type timedSample struct {
	at     time.Time
	sample runtime.Sample
	task   runtime.Task
}

func newUsageMeter() *usageMeter {
	return &usageMeter{latest: map[string]api.Usage{}, last: map[string]timedSample{}}
}

// snapshot is the latest usage of every measured replica.
func (u *usageMeter) snapshot() map[string]api.Usage {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.latest) == 0 {
		return nil
	}
	return maps.Clone(u.latest)
}

// measureUsage measures the running replicas every UsageInterval until
// ctx ends (never when the interval is 0).
func (a *Agent) measureUsage(ctx context.Context) {
	if a.cfg.UsageInterval <= 0 {
		return
	}
	tick := time.NewTicker(a.cfg.UsageInterval)
	defer tick.Stop()
	for {
		a.measureOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (a *Agent) measureOnce(ctx context.Context) {
	a.mu.Lock()
	tasks := map[string]runtime.Task{}
	for id, s := range a.supervisors {
		if t := s.running(); t != nil {
			tasks[id] = t
		}
	}
	a.mu.Unlock()
	latest := map[string]api.Usage{}
	for id, t := range tasks {
		m, ok := t.(runtime.Measurer)
		if !ok {
			continue
		}
		callCtx, cancel := context.WithTimeout(ctx, a.cfg.RequestTimeout)
		sample, err := m.Measure(callCtx)
		cancel()
		if err != nil {
			continue
		}
		now := time.Now()
		if usage, ok := a.usage.rate(id, t, sample, now); ok {
			latest[id] = usage
		}
	}
	a.usage.mu.Lock()
	a.usage.latest = latest
	for id := range a.usage.last {
		if _, ok := tasks[id]; !ok {
			delete(a.usage.last, id)
		}
	}
	a.usage.mu.Unlock()
}

// rate is a replica's usage from its sample and the one before (of the
// same task: a restarted replica starts its CPU time again).
func (u *usageMeter) rate(id string, t runtime.Task, s runtime.Sample, now time.Time) (api.Usage, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	prev, ok := u.last[id]
	u.last[id] = timedSample{at: now, sample: s, task: t}
	if !ok || prev.task != t || !now.After(prev.at) || s.CPU < prev.sample.CPU {
		return api.Usage{}, false
	}
	milli := int64((s.CPU - prev.sample.CPU) * 1000 / now.Sub(prev.at))
	return api.Usage{MilliCPU: milli, MemoryBytes: s.MemoryBytes}, true
}
