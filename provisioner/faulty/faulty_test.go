package faulty

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/provisioner/fake"
	"github.com/gantry-dev/gantry/provisioner/provisionertest"
)

// newMemory is the in-memory fake with a one-type catalog.
func newMemory() provisioner.Provisioner {
	return fake.New("memory", []provisioner.InstanceType{{Name: "m1", MilliCPU: 1000, MemoryBytes: 1 << 30,
		Offerings: []provisioner.Offering{{Zone: "z", CapacityType: "onDemand", PricePerHour: 1}}}}, nil)
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
	if err != nil || len(p.Provisioner.(*fake.Provider).Instances()) != 1 || inst.ID != p.Provisioner.(*fake.Provider).Instances()[0].ID {
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
