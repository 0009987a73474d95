package metrics

import "github.com/prometheus/client_golang/prometheus"

// Passes are the incremental control loop's instruments.
type Passes struct {
	// Passes counts passes by mode: decided (inputs changed or a
	// deadline came), skipped (nothing changed: decide would decide
	// nothing) and safety (a full pass the safety net ran although
	// nothing changed).
	Passes *prometheus.CounterVec
	// SafetyNetFindings counts safety-net passes that decided something:
	// each is a change the incremental path missed, a bug.
	SafetyNetFindings prometheus.Counter
}

// Pass modes.
const (
	PassDecided = "decided"
	PassSkipped = "skipped"
	PassSafety  = "safety"
)

func newPasses() Passes {
	return Passes{
		Passes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gantry_passes_total", Help: "Control-loop passes, by mode: decided, skipped (nothing changed since a pass that decided nothing) or safety (the full pass of the safety net).",
		}, []string{"mode"}),
		SafetyNetFindings: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gantry_safety_net_findings_total", Help: "Safety-net full passes that found something to do which the incremental path had skipped (each is a bug).",
		}),
	}
}

func (p Passes) collectors() []prometheus.Collector {
	return []prometheus.Collector{p.Passes, p.SafetyNetFindings}
}

// Passed counts one pass of a mode.
func (m *Metrics) Passed(mode string) {
	if m != nil {
		m.Passes.Passes.WithLabelValues(mode).Inc()
	}
}

// SafetyNetFound counts a safety-net pass that found something.
func (m *Metrics) SafetyNetFound() {
	if m != nil {
		m.SafetyNetFindings.Inc()
	}
}
