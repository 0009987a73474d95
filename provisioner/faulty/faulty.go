// Package faulty wraps a provisioner with injected faults for tests:
// typed errors at a rate, latency and latency spikes, and partial launches
// (the instance is created but the answer is lost, as when a connection
// drops), so a fleet can be shown to converge anyway.
package faulty

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/gantry-dev/gantry/provisioner"
)

// Config says what to inject.
type Config struct {
	// Rate is the probability that a call fails, with a kind drawn from Kinds.
	Rate  float64
	Kinds []provisioner.ErrorKind
	// FailFirst makes the first N calls (of Ops) fail for certain, cycling
	// through Kinds, so a test sees every kind whatever the dice say.
	FailFirst int
	// Ops limits faults to these operations (Launch, Terminate, Stop,
	// Start, Describe, List); empty means all.
	Ops []string
	// Latency is added to every call; SpikeRate of calls wait Spike more.
	Latency   time.Duration
	SpikeRate float64
	Spike     time.Duration
	// PartialLaunch is the probability that a launch creates the instance
	// but reports a transport error.
	PartialLaunch float64
	// LaunchFilter, when set, limits launch faults to the specs it accepts
	// (for example spot launches only).
	LaunchFilter func(provisioner.LaunchSpec) bool
	// Seed makes the faults reproducible.
	Seed uint64
}

// Provider is the wrapped provisioner.
type Provider struct {
	provisioner.Provisioner
	cfg Config

	mu       sync.Mutex
	rng      *rand.Rand
	injected map[string]int
	calls    int
}

// Wrap injects faults into p.
func Wrap(p provisioner.Provisioner, cfg Config) *Provider {
	return &Provider{Provisioner: p, cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)), injected: map[string]int{}}
}

// SetConfig changes the faults (for example to stop them and watch the
// fleet converge).
func (p *Provider) SetConfig(cfg Config) {
	p.mu.Lock()
	defer p.mu.Unlock()
	cfg.Seed = p.cfg.Seed
	p.cfg = cfg
}

// Injected counts the faults injected so far, by "op/kind".
func (p *Provider) Injected() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int, len(p.injected))
	for k, v := range p.injected {
		out[k] = v
	}
	return out
}

// before waits the configured latency and decides whether op fails.
func (p *Provider) before(ctx context.Context, op string) error {
	p.mu.Lock()
	cfg := p.cfg
	wait := cfg.Latency
	if cfg.SpikeRate > 0 && p.rng.Float64() < cfg.SpikeRate {
		wait += cfg.Spike
	}
	var fault provisioner.ErrorKind
	if len(cfg.Kinds) > 0 && applies(cfg.Ops, op) {
		p.calls++
		switch {
		case p.calls <= cfg.FailFirst:
			fault = cfg.Kinds[(p.calls-1)%len(cfg.Kinds)]
		case cfg.Rate > 0 && p.rng.Float64() < cfg.Rate:
			fault = cfg.Kinds[p.rng.IntN(len(cfg.Kinds))]
		}
		if fault != "" {
			p.injected[op+"/"+string(fault)]++
		}
	}
	p.mu.Unlock()
	if wait > 0 {
		select {
		case <-ctx.Done():
			return provisioner.Errorf(provisioner.KindTransport, op, "%v", ctx.Err())
		case <-time.After(wait):
		}
	}
	if fault != "" {
		return provisioner.Errorf(fault, op, "injected fault")
	}
	return nil
}

func applies(ops []string, op string) bool {
	if len(ops) == 0 {
		return true
	}
	for _, o := range ops {
		if o == op {
			return true
		}
	}
	return false
}

func (p *Provider) partial() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cfg.PartialLaunch > 0 && p.rng.Float64() < p.cfg.PartialLaunch {
		p.injected["Launch/partial"]++
		return true
	}
	return false
}

// Launch implements provisioner.Provisioner.
func (p *Provider) Launch(ctx context.Context, spec provisioner.LaunchSpec) (*provisioner.Instance, error) {
	p.mu.Lock()
	filter := p.cfg.LaunchFilter
	p.mu.Unlock()
	if filter == nil || filter(spec) {
		if err := p.before(ctx, "Launch"); err != nil {
			return nil, err
		}
	}
	inst, err := p.Provisioner.Launch(ctx, spec)
	if err == nil && p.partial() {
		return nil, provisioner.Errorf(provisioner.KindTransport, "Launch", "injected: instance %s created, answer lost", inst.ID)
	}
	return inst, err
}

// Terminate implements provisioner.Provisioner.
func (p *Provider) Terminate(ctx context.Context, id string) error {
	if err := p.before(ctx, "Terminate"); err != nil {
		return err
	}
	return p.Provisioner.Terminate(ctx, id)
}

// Stop implements provisioner.Stopper when the wrapped provider does.
func (p *Provider) Stop(ctx context.Context, id string) error {
	stopper, ok := p.Provisioner.(provisioner.Stopper)
	if !ok {
		return provisioner.Errorf(provisioner.KindUnsupported, "stop", "%s cannot stop instances", p.Name())
	}
	if err := p.before(ctx, "Stop"); err != nil {
		return err
	}
	return stopper.Stop(ctx, id)
}

// Start implements provisioner.Stopper when the wrapped provider does.
func (p *Provider) Start(ctx context.Context, id string) (*provisioner.Instance, error) {
	stopper, ok := p.Provisioner.(provisioner.Stopper)
	if !ok {
		return nil, provisioner.Errorf(provisioner.KindUnsupported, "start", "%s cannot start instances", p.Name())
	}
	if err := p.before(ctx, "Start"); err != nil {
		return nil, err
	}
	return stopper.Start(ctx, id)
}

// Describe implements provisioner.Provisioner.
func (p *Provider) Describe(ctx context.Context, id string) (*provisioner.Instance, error) {
	if err := p.before(ctx, "Describe"); err != nil {
		return nil, err
	}
	return p.Provisioner.Describe(ctx, id)
}

// List implements provisioner.Provisioner.
func (p *Provider) List(ctx context.Context, f provisioner.Filter) ([]provisioner.Instance, error) {
	if err := p.before(ctx, "List"); err != nil {
		return nil, err
	}
	return p.Provisioner.List(ctx, f)
}

// String names the wrapper in logs.
func (p *Provider) String() string { return fmt.Sprintf("faulty(%s)", p.Name()) }
