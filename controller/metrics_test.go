package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/decide"
	"github.com/gantry-dev/gantry/failover"
	"github.com/gantry-dev/gantry/metrics"
	"github.com/gantry-dev/gantry/store"
)

func TestRolloutMetricsCountTransitions(t *testing.T) {
	m := metrics.New(prometheus.NewRegistry())
	c := &Controller{Deps: Deps{Metrics: m}}
	failedOver := time.Date(2026, 11, 24, 6, 0, 0, 0, time.UTC)
	pass := func(before, after decide.Memory) { c.recordRollouts(before, after) }

	running := decide.Memory{
		Deployments: map[string]api.Deployment{"web": {Number: 1, State: api.DeployProgressing}},
		Failover:    map[string]failover.State{"db": {Phase: failover.PhaseHealthy, Epoch: 1, Primary: "east"}},
	}
	pass(decide.Memory{}, running)
	done := decide.Memory{
		Deployments: map[string]api.Deployment{"web": {Number: 1, State: api.DeployComplete}},
		Failover:    map[string]failover.State{"db": {Phase: failover.PhaseHealthy, Epoch: 2, Primary: "west", LastFailover: &failedOver}},
	}
	pass(running, done)
	pass(done, done) // nothing changed: nothing more is counted
	next := decide.Memory{Deployments: map[string]api.Deployment{"web": {Number: 2, State: api.DeployFailed}}, Failover: done.Failover}
	pass(done, next)

	for name, c := range map[string]struct {
		got  prometheus.Collector
		want float64
	}{
		"started":                {m.DeploymentsStarted, 2},
		"finished Complete":      {m.DeploymentsFinished.WithLabelValues(api.DeployComplete), 1},
		"finished Failed":        {m.DeploymentsFinished.WithLabelValues(api.DeployFailed), 1},
		"services Failed now":    {m.Deployments.WithLabelValues(api.DeployFailed), 1},
		"failovers of db":        {m.Failovers.WithLabelValues("db"), 1},
		"epoch of db":            {m.FailoverEpoch.WithLabelValues("db"), 2},
		"db healthy, west leads": {m.FailoverPhase.WithLabelValues("db", failover.PhaseHealthy, "west"), 1},
	} {
		if got := testutil.ToFloat64(c.got); got != c.want {
			t.Errorf("%s: %v, want %v", name, got, c.want)
		}
	}
}

// A decision's latency runs from the oldest change a pass is the first
// to read to the end of the act step that carries it out; a pass that
// only sees its own writes, or changes nothing, observes nothing.
func TestDecisionLatencyRunsFromTheChangeToTheAct(t *testing.T) {
	e := newEnv(t)
	m := metrics.New(prometheus.NewRegistry())
	e.ctrl.Metrics = m
	e.pass() // learns where the feed is
	e.apply(twoMachines)
	e.clock.Step(3 * time.Second)
	if plan := e.pass(); len(plan.Launches) != 2 {
		t.Fatalf("launches: %+v", plan.Launches)
	}
	count, sum := histogram(t, m.DecisionLatency)
	if count != 1 || sum != 3 {
		t.Fatalf("after the launches: %d observations summing to %vs, want 1 of 3s", count, sum)
	}
	e.clock.Step(time.Second)
	e.pass()
	if count, _ := histogram(t, m.DecisionLatency); count != 1 {
		t.Fatalf("a pass after its own writes observed a latency (%d observations)", count)
	}
}

// A change another writer commits while a pass acts is not that pass's
// own write: the next pass, which carries it out, measures its latency
// from its commit.
func TestDecisionLatencyCountsAChangeCommittedDuringAnAct(t *testing.T) {
	e := newEnv(t)
	m := metrics.New(prometheus.NewRegistry())
	e.ctrl.Metrics = m
	e.pass()
	e.apply(twoMachines)
	e.clock.Step(3 * time.Second)
	during := &writeDuringAct{Store: e.ctrl.Store, write: func() {
		e.clock.Step(time.Second)
		e.apply(strings.Replace(twoMachines, "minSize: 2", "minSize: 3", 1))
		e.clock.Step(time.Second) // the act's own writes, and its workers', come later
	}}
	e.ctrl.Store = during
	if plan := e.pass(); len(plan.Launches) != 2 {
		t.Fatalf("launches: %+v", plan.Launches)
	}
	if !during.wrote {
		t.Fatal("the other writer did not write during the act")
	}
	e.clock.Step(2 * time.Second)
	if plan := e.pass(); len(plan.Launches) != 1 {
		t.Fatalf("after the group grew: launches %+v", plan.Launches)
	}
	// The first act ended 5s after the first change (the other writer's
	// two seconds went by during it); the second 3s after the change made
	// then.
	if count, sum := histogram(t, m.DecisionLatency); count != 2 || sum != 5+3 {
		t.Fatalf("%d observations summing to %vs, want 2: 5s, and 3s for the change made during the act", count, sum)
	}
}

// writeDuringAct is a store that, the first time a write transaction
// begins, lets write commit another writer's change first.
type writeDuringAct struct {
	store.Store
	write func()
	wrote bool
}

func (s *writeDuringAct) Update(ctx context.Context, fn func(tx store.Tx) error) error {
	if !s.wrote {
		s.wrote = true
		s.write()
	}
	return s.Store.Update(ctx, fn)
}

func histogram(t *testing.T, h prometheus.Histogram) (uint64, float64) {
	t.Helper()
	var out dto.Metric
	if err := h.Write(&out); err != nil {
		t.Fatal(err)
	}
	return out.Histogram.GetSampleCount(), out.Histogram.GetSampleSum()
}
