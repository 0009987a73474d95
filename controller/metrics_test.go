package controller

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/decide"
	"github.com/gantry-dev/gantry/failover"
	"github.com/gantry-dev/gantry/metrics"
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

func histogram(t *testing.T, h prometheus.Histogram) (uint64, float64) {
	t.Helper()
	var out dto.Metric
	if err := h.Write(&out); err != nil {
		t.Fatal(err)
	}
	return out.Histogram.GetSampleCount(), out.Histogram.GetSampleSum()
}
