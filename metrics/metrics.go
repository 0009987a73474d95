// Package metrics holds Gantry's Prometheus metrics. Each server registers
// its own set in its own registry; nothing is global.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the server's instruments. A nil *Metrics records nothing.
type Metrics struct {
	Provisions        *prometheus.CounterVec
	Terminations      *prometheus.CounterVec
	LaunchToJoin      prometheus.Histogram
	Machines          *prometheus.GaugeVec
	PendingReplicas   *prometheus.GaugeVec
	ReconcileDuration prometheus.Histogram
	DecisionLatency   prometheus.Histogram
	Heartbeats        *prometheus.CounterVec
	HeartbeatFlushes  prometheus.Histogram
	LeaderGauge       prometheus.Gauge
	Rollouts
	Requests
	Passes
}

// New creates the instruments and registers them.
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Provisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gantry_provisions_total", Help: "Launch calls to providers, by provider and result (launched, or the error kind).",
		}, []string{"provider", "result"}),
		Terminations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gantry_terminations_total", Help: "Machines sent to termination, by cause.",
		}, []string{"cause"}),
		LaunchToJoin: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "gantry_launch_to_join_seconds", Help: "Time from a machine's launch intent to its agent joining.",
			Buckets: prometheus.ExponentialBuckets(0.25, 2, 14),
		}),
		Machines: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "gantry_machines", Help: "Live machines by cluster, join state and fleet state.",
		}, []string{"cluster", "join_state", "fleet_state"}),
		PendingReplicas: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "gantry_pending_replicas", Help: "Replicas without a machine, by cluster.",
		}, []string{"cluster"}),
		ReconcileDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "gantry_reconcile_duration_seconds", Help: "Duration of one control-loop pass.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}),
		DecisionLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "gantry_decision_latency_seconds", Help: "Time from the oldest store change a pass read to the end of its act step (its writes and the provider calls it started), for passes that changed something.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
		}),
		Heartbeats: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gantry_heartbeats_total", Help: "Heartbeats received, by path: view (nothing changed; answered from the server's view of the store, kept in memory, flushed in batches), quiet (the same, but read from the store) or changed (written at once).",
		}, []string{"path"}),
		HeartbeatFlushes: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "gantry_heartbeat_flush_machines", Help: "Machines per flushed batch of heartbeats.",
			Buckets: prometheus.ExponentialBuckets(1, 4, 9),
		}),
		LeaderGauge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gantry_leader", Help: "1 while this server leads (runs the control loop), else 0.",
		}),
	}
	m.Rollouts, m.Requests, m.Passes = newRollouts(), newRequests(), newPasses()
	reg.MustRegister(m.Collectors()...)
	return m
}

// Collectors are every instrument of m.
func (m *Metrics) Collectors() []prometheus.Collector {
	own := []prometheus.Collector{m.Provisions, m.Terminations, m.LaunchToJoin, m.Machines, m.PendingReplicas, m.ReconcileDuration, m.DecisionLatency,
		m.Heartbeats, m.HeartbeatFlushes, m.LeaderGauge}
	return append(append(append(own, m.Rollouts.collectors()...), m.Requests.collectors()...), m.Passes.collectors()...)
}

// Provisioned counts one launch call.
func (m *Metrics) Provisioned(provider, result string) {
	if m != nil {
		m.Provisions.WithLabelValues(provider, result).Inc()
	}
}

// Terminated counts a machine sent to termination.
func (m *Metrics) Terminated(cause string) {
	if m != nil {
		m.Terminations.WithLabelValues(cause).Inc()
	}
}

// Joined observes a machine's launch-to-join time.
func (m *Metrics) Joined(seconds float64) {
	if m != nil {
		m.LaunchToJoin.Observe(seconds)
	}
}

// Heartbeat counts one heartbeat by path (quiet or changed).
func (m *Metrics) Heartbeat(path string) {
	if m != nil {
		m.Heartbeats.WithLabelValues(path).Inc()
	}
}

// HeartbeatsFlushed observes one flushed batch.
func (m *Metrics) HeartbeatsFlushed(machines int) {
	if m != nil {
		m.HeartbeatFlushes.Observe(float64(machines))
	}
}

// Leading sets the leader gauge.
func (m *Metrics) Leading(leading bool) {
	if m != nil {
		v := 0.0
		if leading {
			v = 1
		}
		m.LeaderGauge.Set(v)
		m.LeaderChanges.WithLabelValues(map[bool]string{true: "leading", false: "following"}[leading]).Inc()
	}
}

// Reconciled observes one pass.
func (m *Metrics) Reconciled(seconds float64) {
	if m != nil {
		m.ReconcileDuration.Observe(seconds)
	}
}

// Decided observes one decision's latency.
func (m *Metrics) Decided(seconds float64) {
	if m != nil {
		m.DecisionLatency.Observe(seconds)
	}
}

// MachineCount is one label set of the machines gauge.
type MachineCount struct {
	Cluster, JoinState, FleetState string
	N                              int
}

// SetFleet replaces the machine and pending-replica gauges.
func (m *Metrics) SetFleet(machines []MachineCount, pending map[string]int) {
	if m == nil {
		return
	}
	m.Machines.Reset()
	for _, c := range machines {
		m.Machines.WithLabelValues(c.Cluster, c.JoinState, c.FleetState).Add(float64(c.N))
	}
	m.PendingReplicas.Reset()
	for cluster, n := range pending {
		m.PendingReplicas.WithLabelValues(cluster).Set(float64(n))
	}
}

// StoreHealth is what the store health metrics read.
type StoreHealth struct {
	Healthy  bool
	Failures int64
}

// WatchStore exports whether the store accepts writes, and how many writes
// failed, read from health at each scrape.
func (m *Metrics) WatchStore(reg prometheus.Registerer, health func() StoreHealth) {
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "gantry_store_healthy", Help: "1 while the store accepts writes, 0 while they fail."},
			func() float64 {
				if health().Healthy {
					return 1
				}
				return 0
			}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "gantry_store_write_failures_total", Help: "Store writes that failed for the store's own reasons (disk full, read-only)."},
			func() float64 { return float64(health().Failures) }),
	)
}
