package sim

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/gantry-dev/gantry/api"
)

// World is the model of what is outside Gantry: how long a provider
// takes to answer, an instance to boot and its agent to join, a
// terminate to finish and a replica to start; how often a launch runs
// out of capacity; how often a spot machine is taken back. Every field
// is a knob of the `world` file; DefaultWorld states the defaults.
type World struct {
	// LaunchLatency is from a launch call to its answer (the instance
	// exists and is billed from then on).
	LaunchLatency Span `yaml:"launchLatency"`
	// BootToJoin is from the launch's answer to the machine's agent
	// joining.
	BootToJoin Span `yaml:"bootToJoin"`
	// TerminateLatency is from a terminate call to the instance gone
	// (billed until then).
	TerminateLatency Span `yaml:"terminateLatency"`
	// ReplicaStart is from a replica's placement on a joined machine to it
	// running.
	ReplicaStart Span `yaml:"replicaStart"`
	// InsufficientCapacity is the chance that a launch of each capacity
	// type fails for want of capacity (ICE), after its launch latency.
	InsufficientCapacity CapacityOdds `yaml:"insufficientCapacity"`
	// SpotInterruptionsPerHour is the rate at which the provider takes a
	// running spot machine back (exponential: the chance per hour of a
	// machine's life). Its agent goes silent, as a real one does.
	SpotInterruptionsPerHour float64 `yaml:"spotInterruptionsPerHour"`
	// MaxPassesPerInstant bounds the passes run one after another at one
	// instant while each decides something (the controller passes again
	// at once after a pass that acted).
	MaxPassesPerInstant int `yaml:"maxPassesPerInstant"`
	// PassGrain is the control loop's reaction time: what happens between
	// two instants on this grain is decided at the later one, together
	// (a controller's pass takes about as long; 0: each at its own time).
	PassGrain time.Duration `yaml:"passGrain"`
	// ReconcileInterval is the controller's --reconcile-interval: what
	// triggers no pass (a replica's start, which its agent reports in a
	// heartbeat; a deadline; a machine falling silent) is decided at the
	// first pass after it, and with nothing triggering one that pass comes
	// this long after the last (0: each at its own time, on PassGrain).
	ReconcileInterval time.Duration `yaml:"reconcileInterval"`
	// BoundEvery is how often the cost's lower bound is planned afresh
	// (from scratch, for the demand of the time) when the demand changed;
	// 0: never.
	BoundEvery time.Duration `yaml:"boundEvery"`
}

// Span is a duration drawn uniformly between Min and Max (equal: fixed).
type Span struct {
	Min time.Duration `yaml:"min"`
	Max time.Duration `yaml:"max"`
}

// CapacityOdds are chances by capacity type.
type CapacityOdds struct {
	OnDemand float64 `yaml:"onDemand"`
	Spot     float64 `yaml:"spot"`
}

// DefaultWorld is a public cloud on a normal day: EC2-like launch and
// boot times, spot capacity now and then short, a spot machine taken back
// about once in a thousand machine-hours.
func DefaultWorld() World {
	return World{
		LaunchLatency:            Span{Min: 2 * time.Second, Max: 5 * time.Second},
		BootToJoin:               Span{Min: 40 * time.Second, Max: 90 * time.Second},
		TerminateLatency:         Span{Min: 20 * time.Second, Max: 60 * time.Second},
		ReplicaStart:             Span{Min: 2 * time.Second, Max: 10 * time.Second},
		InsufficientCapacity:     CapacityOdds{OnDemand: 0, Spot: 0.02},
		SpotInterruptionsPerHour: 0.001,
		MaxPassesPerInstant:      10,
		PassGrain:                time.Second,
		ReconcileInterval:        2 * time.Second,
		BoundEvery:               time.Hour,
	}
}

// LocalWorld is the local provider's (machines are agent processes on
// this host), as the calibration measured it: launches answered in 5–21
// ms, agents joining 48–86 ms later, gone 57–74 ms after a terminate;
// spans a little wider for a busier host. Nothing runs out of capacity
// and nothing is taken back; the controller ticks as gantry dev's does.
func LocalWorld() World {
	w := DefaultWorld()
	w.LaunchLatency = Span{Min: 5 * time.Millisecond, Max: 50 * time.Millisecond}
	w.BootToJoin = Span{Min: 50 * time.Millisecond, Max: 500 * time.Millisecond}
	w.TerminateLatency = Span{Min: 50 * time.Millisecond, Max: 200 * time.Millisecond}
	w.ReplicaStart = Span{Min: 500 * time.Millisecond, Max: 2 * time.Second}
	w.InsufficientCapacity = CapacityOdds{}
	w.SpotInterruptionsPerHour = 0
	w.ReconcileInterval = 500 * time.Millisecond // gantry dev's
	return w
}

// WorldFor is the world a spec's clusters run in unless a world file
// says otherwise: the local provider's when every cluster is on it (a
// `gantry dev` fleet, whose machines join within a second and are
// replaced after a minute without), else a public cloud's (DefaultWorld).
// The name says which.
func WorldFor(clusters []*api.Cluster) (World, string) {
	local := len(clusters) > 0
	for _, c := range clusters {
		local = local && c.Spec.Provider.Name == localProvider
	}
	if local {
		return LocalWorld(), "local"
	}
	return DefaultWorld(), "cloud"
}

// localProvider is the local provider's name in a cluster's spec.
const localProvider = "local"

// ReadWorld reads a world file over base (the world it changes): a YAML
// mapping of the knobs to change. An unknown knob or a value out of range
// is refused with the file and field named.
func ReadWorld(base World, file string, data []byte) (World, error) {
	w := base
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return World{}, fmt.Errorf("world %s: %w", file, err)
	}
	if len(doc.Content) == 0 {
		return w, nil
	}
	if err := decodeStrict(doc.Content[0], &w); err != nil {
		return World{}, fmt.Errorf("world %s: %w", file, err)
	}
	if err := w.Check(); err != nil {
		return World{}, fmt.Errorf("world %s: %w", file, err)
	}
	return w, nil
}

// decodeStrict decodes a mapping, refusing fields the value does not have.
func decodeStrict(n *yaml.Node, v any) error {
	data, err := yaml.Marshal(n)
	if err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	return dec.Decode(v)
}

// Check refuses knobs out of range, naming each.
func (w World) Check() error {
	var bad []error
	for name, s := range map[string]Span{"launchLatency": w.LaunchLatency, "bootToJoin": w.BootToJoin,
		"terminateLatency": w.TerminateLatency, "replicaStart": w.ReplicaStart} {
		if s.Min < 0 || s.Max < s.Min {
			bad = append(bad, fmt.Errorf("%s: want 0 <= min <= max, have min %s, max %s", name, s.Min, s.Max))
		}
	}
	for name, p := range map[string]float64{"insufficientCapacity.onDemand": w.InsufficientCapacity.OnDemand,
		"insufficientCapacity.spot": w.InsufficientCapacity.Spot} {
		if p < 0 || p > 1 || math.IsNaN(p) {
			bad = append(bad, fmt.Errorf("%s: want a chance between 0 and 1, have %v", name, p))
		}
	}
	if w.SpotInterruptionsPerHour < 0 || math.IsNaN(w.SpotInterruptionsPerHour) {
		bad = append(bad, fmt.Errorf("spotInterruptionsPerHour: want 0 or more, have %v", w.SpotInterruptionsPerHour))
	}
	if w.MaxPassesPerInstant < 1 {
		bad = append(bad, fmt.Errorf("maxPassesPerInstant: want 1 or more, have %d", w.MaxPassesPerInstant))
	}
	if w.PassGrain < 0 {
		bad = append(bad, fmt.Errorf("passGrain: want 0 or more, have %s", w.PassGrain))
	}
	if w.ReconcileInterval < 0 {
		bad = append(bad, fmt.Errorf("reconcileInterval: want 0 or more, have %s", w.ReconcileInterval))
	}
	if w.BoundEvery < 0 {
		bad = append(bad, fmt.Errorf("boundEvery: want 0 (never) or more, have %s", w.BoundEvery))
	}
	return errors.Join(bad...)
}

// draw is a duration of the span.
func (s Span) draw(rng *rand.Rand) time.Duration {
	if s.Max <= s.Min {
		return s.Min
	}
	return s.Min + time.Duration(rng.Int64N(int64(s.Max-s.Min)+1))
}

// interruptionAfter is how long a spot machine runs before the provider
// takes it back (false: never, in the time simulated).
func (w World) interruptionAfter(rng *rand.Rand) (time.Duration, bool) {
	if w.SpotInterruptionsPerHour <= 0 {
		return 0, false
	}
	hours := rng.ExpFloat64() / w.SpotInterruptionsPerHour
	if hours > 24*365*10 {
		return 0, false
	}
	return time.Duration(hours * float64(time.Hour)), true
}
