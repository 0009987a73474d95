package controller

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

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
