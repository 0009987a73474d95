package metrics

import (
	"math"
	"regexp"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// Rollouts are the deployment and failover instruments.
type Rollouts struct {
	DeploymentsStarted  prometheus.Counter
	DeploymentsFinished *prometheus.CounterVec
	Deployments         *prometheus.GaugeVec
	Failovers           *prometheus.CounterVec
	FailoverEpoch       *prometheus.GaugeVec
	FailoverPhase       *prometheus.GaugeVec
}

// Requests are the API's and the heartbeats' timing instruments.
type Requests struct {
	APIRequests           *prometheus.CounterVec
	APIDuration           *prometheus.HistogramVec
	HeartbeatDuration     prometheus.Histogram
	HeartbeatFlushSeconds prometheus.Histogram
	LeaderChanges         *prometheus.CounterVec
}

func newRollouts() Rollouts {
	return Rollouts{
		DeploymentsStarted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gantry_deployments_started_total", Help: "Service deployments begun (a new revision, an undo, a restart or a revert).",
		}),
		DeploymentsFinished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gantry_deployments_finished_total", Help: "Service deployments ended, by result (Complete or Failed).",
		}, []string{"result"}),
		Deployments: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "gantry_deployments", Help: "Services by the state of their latest deployment.",
		}, []string{"state"}),
		Failovers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gantry_failovers_total", Help: "Failovers and switchovers completed, by failover group.",
		}, []string{"group"}),
		FailoverEpoch: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "gantry_failover_epoch", Help: "Each failover group's epoch (it grows by one per change of primary).",
		}, []string{"group"}),
		FailoverPhase: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "gantry_failover_phase", Help: "1 for each failover group's current phase, with its primary side.",
		}, []string{"group", "phase", "primary"}),
	}
}

func newRequests() Requests {
	latency := prometheus.ExponentialBuckets(0.0005, 2, 16)
	return Requests{
		APIRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gantry_api_requests_total", Help: "API requests served, by route (method and pattern) and status code.",
		}, []string{"route", "code"}),
		APIDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "gantry_api_request_duration_seconds", Help: "Time to serve an API request, by route.", Buckets: latency,
		}, []string{"route"}),
		HeartbeatDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "gantry_heartbeat_duration_seconds", Help: "Time to take in one heartbeat and answer it.", Buckets: latency,
		}),
		HeartbeatFlushSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "gantry_heartbeat_flush_duration_seconds", Help: "Time to write one batch of quiet heartbeats to the store.", Buckets: latency,
		}),
		LeaderChanges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gantry_leader_changes_total", Help: "Times this server began (to=leading) or stopped (to=following) leading.",
		}, []string{"to"}),
	}
}

func (r Rollouts) collectors() []prometheus.Collector {
	return []prometheus.Collector{r.DeploymentsStarted, r.DeploymentsFinished, r.Deployments, r.Failovers, r.FailoverEpoch, r.FailoverPhase}
}

func (q Requests) collectors() []prometheus.Collector {
	return []prometheus.Collector{q.APIRequests, q.APIDuration, q.HeartbeatDuration, q.HeartbeatFlushSeconds, q.LeaderChanges}
}

// Served counts one API request and observes its duration.
func (m *Metrics) Served(route string, code int, seconds float64) {
	if m != nil {
		m.APIRequests.WithLabelValues(route, strconv.Itoa(code)).Inc()
		m.APIDuration.WithLabelValues(route).Observe(seconds)
	}
}

// HeartbeatTook observes one heartbeat's handling.
func (m *Metrics) HeartbeatTook(seconds float64) {
	if m != nil {
		m.HeartbeatDuration.Observe(seconds)
	}
}

// FlushTook observes one heartbeat batch's write.
func (m *Metrics) FlushTook(seconds float64) {
	if m != nil {
		m.HeartbeatFlushSeconds.Observe(seconds)
	}
}

// DeploymentStarted counts a deployment begun.
func (m *Metrics) DeploymentStarted() {
	if m != nil {
		m.DeploymentsStarted.Inc()
	}
}

// DeploymentFinished counts a deployment ended with result.
func (m *Metrics) DeploymentFinished(result string) {
	if m != nil {
		m.DeploymentsFinished.WithLabelValues(result).Inc()
	}
}

// FailedOver counts a completed failover of group.
func (m *Metrics) FailedOver(group string) {
	if m != nil {
		m.Failovers.WithLabelValues(group).Inc()
	}
}

// FailoverGroup is one group's state for the gauges.
type FailoverGroup struct {
	Name, Phase, Primary string
	Epoch                int64
}

// SetRollouts replaces the deployment and failover gauges.
func (m *Metrics) SetRollouts(deploymentStates map[string]int, groups []FailoverGroup) {
	if m == nil {
		return
	}
	m.Deployments.Reset()
	for state, n := range deploymentStates {
		m.Deployments.WithLabelValues(state).Set(float64(n))
	}
	m.FailoverEpoch.Reset()
	m.FailoverPhase.Reset()
	for _, g := range groups {
		m.FailoverEpoch.WithLabelValues(g.Name).Set(float64(g.Epoch))
		m.FailoverPhase.WithLabelValues(g.Name, g.Phase, g.Primary).Set(1)
	}
}

// descName reads a descriptor's name: client_golang keeps it private
// and prints it as fqName: "name".
func descName(d *prometheus.Desc) string {
	if m := fqName.FindStringSubmatch(d.String()); m != nil {
		return m[1]
	}
	return ""
}

// Names are the metric names the collectors describe (whether or not
// they have been observed yet).
func Names(cs ...prometheus.Collector) []string {
	ch := make(chan *prometheus.Desc, 64)
	go func() {
		for _, c := range cs {
			c.Describe(ch)
		}
		close(ch)
	}()
	var names []string
	for d := range ch {
		names = append(names, descName(d))
	}
	return names
}

// HeartbeatCounts is the heartbeat duration histogram as it stands: each
// bucket's upper bound in seconds and how many heartbeats took at most
// that long (cumulative, since the server started).
func (m *Metrics) HeartbeatCounts() (bounds []float64, cumulative []uint64) {
	if m == nil {
		return nil, nil
	}
	var out dto.Metric
	if err := m.HeartbeatDuration.Write(&out); err != nil || out.Histogram == nil {
		return nil, nil
	}
	for _, b := range out.Histogram.GetBucket() {
		bounds = append(bounds, b.GetUpperBound())
		cumulative = append(cumulative, b.GetCumulativeCount())
	}
	return append(bounds, math.Inf(1)), append(cumulative, out.Histogram.GetSampleCount())
}
