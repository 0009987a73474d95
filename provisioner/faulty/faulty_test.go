package faulty

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/provisioner/provisionertest"
)

// memory is a minimal in-memory provisioner: the thing under the wrapper.
type memory struct {
	byKey map[string]*provisioner.Instance
	byID  map[string]*provisioner.Instance
}

func newMemory() *memory {
	return &memory{byKey: map[string]*provisioner.Instance{}, byID: map[string]*provisioner.Instance{}}
}

func (m *memory) Name() string { return "memory" }
func (m *memory) InstanceTypes() []provisioner.InstanceType {
	return []provisioner.InstanceType{{Name: "m1", MilliCPU: 1000, MemoryBytes: 1 << 30, Offerings: []provisioner.Offering{{Zone: "z", CapacityType: "onDemand", PricePerHour: 1}}}}
}
func (m *memory) CapacityTypes() []string                     { return []string{"onDemand"} }
func (m *memory) PriceHint(provisioner.Shape) (float64, bool) { return 1, true }
func (m *memory) Stop(context.Context, string) error          { return provisioner.ErrUnsupported }
func (m *memory) Start(context.Context, string) (*provisioner.Instance, error) {
	return nil, provisioner.ErrUnsupported
}

func (m *memory) Launch(_ context.Context, s provisioner.LaunchSpec) (*provisioner.Instance, error) {
	if s.IdempotencyKey == "" || s.InstanceType != "m1" {
		return nil, provisioner.ErrInvalid
	}
	if inst, ok := m.byKey[s.IdempotencyKey]; ok {
		c := *inst
		return &c, nil
	}
	inst := &provisioner.Instance{ID: "i-" + s.IdempotencyKey, State: provisioner.StatePending, InstanceType: "m1", Tags: s.Tags, LaunchedAt: time.Now(), Addresses: []string{"10.0.0.1"}}
	m.byKey[s.IdempotencyKey], m.byID[inst.ID] = inst, inst
	c := *inst
	inst.State = provisioner.StateRunning // it runs right after Launch returns
	return &c, nil
}

func (m *memory) Terminate(_ context.Context, id string) error {
	if inst, ok := m.byID[id]; ok {
		inst.State = provisioner.StateTerminated
	}
	return nil
}

func (m *memory) Describe(_ context.Context, id string) (*provisioner.Instance, error) {
	inst, ok := m.byID[id]
	if !ok {
		return nil, provisioner.ErrNotFound
	}
	c := *inst
	return &c, nil
}

func (m *memory) List(_ context.Context, f provisioner.Filter) ([]provisioner.Instance, error) {
	var out []provisioner.Instance
	for _, inst := range m.byID {
		if f.Matches(*inst) {
			out = append(out, *inst)
		}
	}
	return out, nil
}

// With no faults configured, the wrapper is transparent: the contract holds.
func TestTransparentWithoutFaults(t *testing.T) {
	provisionertest.RunWith(t, func(*testing.T) provisioner.Provisioner { return Wrap(newMemory(), Config{}) },
		provisionertest.Options{Timeout: 5 * time.Second, Poll: time.Millisecond})
}

func TestInjectsEachKind(t *testing.T) {
	for _, kind := range []provisioner.ErrorKind{provisioner.KindInsufficientCapacity, provisioner.KindAuth, provisioner.KindTransport, provisioner.KindNotFound} {
		p := Wrap(newMemory(), Config{Rate: 1, Kinds: []provisioner.ErrorKind{kind}, Ops: []string{"Launch"}, Seed: 1})
		_, err := p.Launch(context.Background(), provisioner.LaunchSpec{InstanceType: "m1", IdempotencyKey: "a"})
		if provisioner.KindOf(err) != kind {
			t.Fatalf("want %s, got %v", kind, err)
		}
		if _, err := p.Describe(context.Background(), "x"); !errors.Is(err, provisioner.ErrNotFound) {
			t.Fatalf("Describe is not in Ops and must pass through: %v", err)
		}
		if p.Injected()["Launch/"+string(kind)] != 1 {
			t.Fatalf("injected %v", p.Injected())
		}
	}
}

func TestRateIsRoughlyHonouredAndSeeded(t *testing.T) {
	count := func(seed uint64) int {
		p := Wrap(newMemory(), Config{Rate: 0.3, Kinds: []provisioner.ErrorKind{provisioner.KindTransport}, Seed: seed})
		n := 0
		for i := 0; i < 1000; i++ {
			if _, err := p.Describe(context.Background(), "x"); provisioner.KindOf(err) == provisioner.KindTransport {
				n++
			}
		}
		return n
	}
	a, b := count(7), count(7)
	if a != b || a < 240 || a > 360 {
		t.Fatalf("30%% of 1000 calls with seed 7: %d then %d", a, b)
	}
}

func TestFailFirstIsCertain(t *testing.T) {
	kinds := []provisioner.ErrorKind{provisioner.KindAuth, provisioner.KindTransport}
	p := Wrap(newMemory(), Config{FailFirst: 3, Kinds: kinds, Ops: []string{"List"}})
	var got []provisioner.ErrorKind
	for i := 0; i < 4; i++ {
		_, err := p.List(context.Background(), provisioner.Filter{})
		got = append(got, provisioner.KindOf(err))
	}
	if got[0] != provisioner.KindAuth || got[1] != provisioner.KindTransport || got[2] != provisioner.KindAuth || got[3] != "" {
		t.Fatalf("first calls failed with %v", got)
	}
}

func TestPartialLaunchLeavesTheInstance(t *testing.T) {
	p := Wrap(newMemory(), Config{PartialLaunch: 1, Seed: 1})
	spec := provisioner.LaunchSpec{InstanceType: "m1", IdempotencyKey: "k"}
	if _, err := p.Launch(context.Background(), spec); provisioner.KindOf(err) != provisioner.KindTransport {
		t.Fatalf("partial launch: %v", err)
	}
	p.SetConfig(Config{})
	inst, err := p.Launch(context.Background(), spec)
	if err != nil || inst.ID != "i-k" {
		t.Fatalf("retry with the same key must find the instance: %+v %v", inst, err)
	}
}

func TestLatencySpikes(t *testing.T) {
	p := Wrap(newMemory(), Config{SpikeRate: 1, Spike: 30 * time.Millisecond, Seed: 1})
	start := time.Now()
	_, _ = p.List(context.Background(), provisioner.Filter{})
	if time.Since(start) < 30*time.Millisecond {
		t.Fatal("no spike")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	p.SetConfig(Config{Latency: time.Second})
	if _, err := p.List(ctx, provisioner.Filter{}); provisioner.KindOf(err) != provisioner.KindTransport {
		t.Fatalf("a cancelled wait is a transport error: %v", err)
	}
}
