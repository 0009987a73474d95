// Package fake is an in-memory provisioner for tests of everything that
// calls a provider: calls are recorded, the next errors of an operation can
// be set, launches can be limited or made partial (the instance is created
// but the answer lost), and calls can hang until their context ends. It
// passes the provisioner contract suite (provisionertest).
package fake

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/provisioner"
	"k8s.io/utils/clock"
)

// Operations, as recorded in calls and named in SetNextError and Hang.
const (
	OpLaunch    = "Launch"
	OpTerminate = "Terminate"
	OpDescribe  = "Describe"
	OpList      = "List"
	OpStop      = "Stop"
	OpStart     = "Start"
	OpConsole   = "ConsoleOutput"
	OpSweep     = "SweepMeshFirewalls"
)

// Call is one recorded call.
type Call struct {
	Op string
	// ID is the instance id of the call (the new instance's for a launch
	// that made one).
	ID   string
	Spec provisioner.LaunchSpec
	Err  error
}

// Provider is the fake.
type Provider struct {
	provisioner.Catalog
	name  string
	clock clock.PassiveClock

	mu        sync.Mutex
	instances map[string]*record
	seq       int
	calls     []Call
	nextErrs  map[string][]error
	// allowed launches before the rest fail with insufficient capacity
	// (-1: no limit); partial launches create the instance but fail.
	allowed int
	partial int
	hang    map[string]chan struct{}
	console map[string]string
	manual  bool
	// slowTerminate leaves terminated instances terminating until SetState.
	slowTerminate bool
	inflight      map[string]int
	// changed is closed (and replaced) whenever a call starts or ends.
	changed chan struct{}
	// firewalls are the clusters whose overlay firewall it made.
	firewalls map[string]bool
}

type record struct {
	provisioner.Instance
	key string
}

// New returns a fake named name with a catalog (DefaultCatalog when nil).
func New(name string, catalog []provisioner.InstanceType, clk clock.PassiveClock) *Provider {
	if catalog == nil {
		catalog = DefaultCatalog()
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Provider{firewalls: map[string]bool{}, Catalog: provisioner.Catalog{Types: catalog}, name: name, clock: clk,
		instances: map[string]*record{}, nextErrs: map[string][]error{}, allowed: -1, hang: map[string]chan struct{}{},
		console: map[string]string{}, inflight: map[string]int{}, changed: make(chan struct{})}
}

// DefaultCatalog is two sizes in two zones, on demand and spot.
func DefaultCatalog() []provisioner.InstanceType {
	offerings := func(price float64) []provisioner.Offering {
		var out []provisioner.Offering
		for _, z := range []string{"zone-a", "zone-b"} {
			out = append(out, provisioner.Offering{Zone: z, CapacityType: api.CapacityOnDemand, PricePerHour: price},
				provisioner.Offering{Zone: z, CapacityType: api.CapacitySpot, PricePerHour: price * 0.4})
		}
		return out
	}
	return []provisioner.InstanceType{
		{Name: "fake.small", MilliCPU: 1000, MemoryBytes: 1 << 30, EphemeralBytes: 10 << 30, Offerings: offerings(0.02)},
		{Name: "fake.large", MilliCPU: 4000, MemoryBytes: 8 << 30, EphemeralBytes: 40 << 30, Offerings: offerings(0.08)},
	}
}

var (
	_ provisioner.Provisioner   = (*Provider)(nil)
	_ provisioner.Stopper       = (*Provider)(nil)
	_ provisioner.ConsoleReader = (*Provider)(nil)
)

// Name implements provisioner.Provisioner.
func (p *Provider) Name() string { return p.name }

// SetNextError makes the next calls of op fail, one error each, in order.
func (p *Provider) SetNextError(op string, errs ...error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.nextErrs[op] = append(p.nextErrs[op], errs...)
}

// SetAllowedLaunches lets n more launches succeed; the ones after fail
// with insufficient capacity. -1 lifts the limit.
func (p *Provider) SetAllowedLaunches(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.allowed = n
}

// SetPartialLaunches makes the next n launches create their instance but
// answer with a transport error.
func (p *Provider) SetPartialLaunches(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.partial = n
}

// Hang makes every call of op block until its context ends (on); off
// lets the calls that hang go on, and the next ones answer.
func (p *Provider) Hang(op string, on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	release, hanging := p.hang[op]
	switch {
	case on && !hanging:
		p.hang[op] = make(chan struct{})
	case !on && hanging:
		close(release)
		delete(p.hang, op)
	}
}

// ManualBoot keeps launched instances pending until SetState moves them;
// by default an instance is running from its first Describe or List.
func (p *Provider) ManualBoot(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.manual = on
}

// SlowTerminate leaves instances terminating after Terminate until
// SetState moves them on, as a cloud's take a while to shut down; by
// default Terminate ends them at once.
func (p *Provider) SlowTerminate(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.slowTerminate = on
}

// SetState moves an instance (for example to make it vanish).
func (p *Provider) SetState(id string, s provisioner.State) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r, ok := p.instances[id]; ok {
		r.State = s
	}
}

// SetConsole sets an instance's console output.
func (p *Provider) SetConsole(id, text string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.console[id] = text
}

// Add puts an instance in the fake as if launched earlier (by another
// server, or before a crash).
func (p *Provider) Add(inst provisioner.Instance) {
	p.mu.Lock()
	defer p.mu.Unlock()
	inst.Tags = maps.Clone(inst.Tags)
	p.instances[inst.ID] = &record{Instance: inst, key: inst.Tags[provisioner.TagLaunchKey]}
}

// Calls returns the recorded calls of op (all calls when op is "").
func (p *Provider) Calls(op string) []Call {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []Call
	for _, c := range p.calls {
		if op == "" || c.Op == op {
			out = append(out, c)
		}
	}
	return out
}

// Await blocks until cond holds (checked each time a call starts or
// ends), or ctx ends: tests wait on the provider's own events instead of
// polling.
func (p *Provider) Await(ctx context.Context, cond func() bool) error {
	for {
		p.mu.Lock()
		changed := p.changed
		p.mu.Unlock()
		if cond() {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// signal wakes Await. Callers hold p.mu.
func (p *Provider) signal() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// InFlight is how many calls of op are running now.
func (p *Provider) InFlight(op string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.inflight[op]
}

// Instances returns every instance, terminated ones too, by id.
func (p *Provider) Instances() []provisioner.Instance {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]provisioner.Instance, 0, len(p.instances))
	for _, r := range p.instances {
		out = append(out, copyOf(r))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Reset forgets calls, errors, limits and hangs (instances stay).
func (p *Provider) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, release := range p.hang {
		close(release)
	}
	p.calls, p.nextErrs, p.allowed, p.partial, p.hang = nil, map[string][]error{}, -1, 0, map[string]chan struct{}{}
}

// begin counts a call in flight, waits while op hangs, and returns the
// error set for it, if any; done records the call. The caller holds no
// lock.
func (p *Provider) begin(ctx context.Context, op string) (done func(Call), err error) {
	p.mu.Lock()
	p.inflight[op]++
	p.signal()
	release, hang := p.hang[op]
	if errs := p.nextErrs[op]; len(errs) > 0 {
		err, p.nextErrs[op] = errs[0], errs[1:]
	}
	p.mu.Unlock()
	done = func(c Call) {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.inflight[op]--
		c.Op = op
		p.calls = append(p.calls, c)
		p.signal()
	}
	if hang {
		select {
		case <-ctx.Done():
			err = provisioner.Errorf(provisioner.KindTransport, op, "%v", ctx.Err())
		case <-release:
		}
	}
	if err != nil {
		done(Call{Err: err})
		return nil, err
	}
	return done, nil
}

// Launch implements provisioner.Provisioner.
func (p *Provider) Launch(ctx context.Context, spec provisioner.LaunchSpec) (*provisioner.Instance, error) {
	done, err := p.begin(ctx, OpLaunch)
	if err != nil {
		return nil, err
	}
	inst, err := p.launch(spec)
	done(Call{ID: inst.ID, Spec: spec, Err: err})
	if err != nil {
		return nil, err
	}
	return &inst, nil
}

func (p *Provider) launch(spec provisioner.LaunchSpec) (provisioner.Instance, error) {
	it, err := p.CheckLaunch(spec)
	if err != nil {
		return provisioner.Instance{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.instances {
		if r.key == spec.IdempotencyKey {
			return copyOf(r), nil
		}
	}
	if p.allowed == 0 {
		return provisioner.Instance{}, provisioner.Errorf(provisioner.KindInsufficientCapacity, "launch", "no %s capacity left in %s", it.Name, spec.Zone)
	}
	if p.allowed > 0 {
		p.allowed--
	}
	p.seq++
	if spec.Bootstrap.NetworkMode == api.NetworkOverlay {
		p.firewalls[spec.Bootstrap.Cluster] = true
	}
	r := &record{key: spec.IdempotencyKey, Instance: provisioner.Instance{
		ID: fmt.Sprintf("%s-%04d", p.name, p.seq), State: provisioner.StatePending, InstanceType: it.Name,
		CapacityType: cmp.Or(spec.CapacityType, api.CapacityOnDemand), Zone: spec.Zone,
		Addresses: []string{fmt.Sprintf("10.0.%d.%d", p.seq/250, p.seq%250+1)}, LaunchedAt: p.clock.Now().UTC(), Tags: maps.Clone(spec.Tags),
	}}
	p.instances[r.ID] = r
	if p.partial > 0 {
		p.partial--
		return provisioner.Instance{ID: r.ID}, provisioner.Errorf(provisioner.KindTransport, "launch", "connection reset (instance %s was made)", r.ID)
	}
	return copyOf(r), nil
}

// Terminate implements provisioner.Provisioner.
func (p *Provider) Terminate(ctx context.Context, id string) error {
	done, err := p.begin(ctx, OpTerminate)
	if err != nil {
		return err
	}
	p.mu.Lock()
	if r, ok := p.instances[id]; ok && r.State != provisioner.StateTerminated {
		r.State = provisioner.StateTerminated
		if p.slowTerminate {
			r.State = provisioner.StateTerminating
		}
	}
	p.mu.Unlock()
	done(Call{ID: id})
	return nil
}

// Describe implements provisioner.Provisioner.
func (p *Provider) Describe(ctx context.Context, id string) (*provisioner.Instance, error) {
	done, err := p.begin(ctx, OpDescribe)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	r, ok := p.instances[id]
	var inst provisioner.Instance
	if ok {
		p.boot(r)
		inst = copyOf(r)
	}
	p.mu.Unlock()
	if !ok {
		err = provisioner.Errorf(provisioner.KindNotFound, "describe", "instance %s", id)
	}
	done(Call{ID: id, Err: err})
	if err != nil {
		return nil, err
	}
	return &inst, nil
}

// boot moves a pending instance to running once observed. Callers hold
// p.mu.
func (p *Provider) boot(r *record) {
	if !p.manual && r.State == provisioner.StatePending {
		r.State = provisioner.StateRunning
	}
}

// List implements provisioner.Provisioner.
func (p *Provider) List(ctx context.Context, f provisioner.Filter) ([]provisioner.Instance, error) {
	done, err := p.begin(ctx, OpList)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	var out []provisioner.Instance
	for _, r := range p.instances {
		p.boot(r)
		if inst := copyOf(r); f.Matches(inst) {
			out = append(out, inst)
		}
	}
	p.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	done(Call{})
	return out, nil
}

// Stop implements provisioner.Stopper.
func (p *Provider) Stop(ctx context.Context, id string) error {
	return p.move(ctx, OpStop, id, provisioner.StateStopped)
}

// Start implements provisioner.Stopper; the instance gets a new address.
func (p *Provider) Start(ctx context.Context, id string) (*provisioner.Instance, error) {
	if err := p.move(ctx, OpStart, id, provisioner.StateRunning); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.instances[id]
	p.seq++
	r.Addresses = []string{fmt.Sprintf("10.1.%d.%d", p.seq/250, p.seq%250+1)}
	inst := copyOf(r)
	return &inst, nil
}

func (p *Provider) move(ctx context.Context, op, id string, to provisioner.State) error {
	done, err := p.begin(ctx, op)
	if err != nil {
		return err
	}
	p.mu.Lock()
	r, ok := p.instances[id]
	if ok && r.State != provisioner.StateTerminated {
		r.State = to
		if to == provisioner.StateStopped {
			r.Addresses = nil
		}
	} else {
		err = provisioner.Errorf(provisioner.KindNotFound, op, "instance %s", id)
	}
	p.mu.Unlock()
	done(Call{ID: id, Err: err})
	return err
}

// ConsoleOutput implements provisioner.ConsoleReader.
func (p *Provider) ConsoleOutput(ctx context.Context, id string) (string, error) {
	done, err := p.begin(ctx, OpConsole)
	if err != nil {
		return "", err
	}
	p.mu.Lock()
	out, ok := p.console[id]
	p.mu.Unlock()
	if !ok {
		err = provisioner.Errorf(provisioner.KindNotFound, "console", "no console output for %s", id)
	}
	done(Call{ID: id, Err: err})
	return out, err
}

func copyOf(r *record) provisioner.Instance {
	inst := r.Instance
	inst.Tags = maps.Clone(r.Tags)
	inst.Addresses = slices.Clone(r.Addresses)
	return inst
}
