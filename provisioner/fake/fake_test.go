package fake_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/provisioner/fake"
	"github.com/gantry-dev/gantry/provisioner/provisionertest"
)

func TestContract(t *testing.T) {
	provisionertest.RunWith(t, func(t *testing.T) provisioner.Provisioner { return fake.New("fake", nil, nil) },
		provisionertest.Options{Poll: time.Millisecond})
}

func spec(key string) provisioner.LaunchSpec {
	return provisioner.LaunchSpec{InstanceType: "fake.small", Zone: "zone-a", IdempotencyKey: key}
}

func TestNextErrorsAndLimits(t *testing.T) {
	ctx := context.Background()
	p := fake.New("fake", nil, nil)
	p.SetNextError(fake.OpLaunch, provisioner.ErrAuth)
	if _, err := p.Launch(ctx, spec("a")); !errors.Is(err, provisioner.ErrAuth) {
		t.Fatalf("first launch: %v, want the set auth error", err)
	}
	p.SetAllowedLaunches(1)
	if _, err := p.Launch(ctx, spec("a")); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Launch(ctx, spec("b")); !errors.Is(err, provisioner.ErrInsufficientCapacity) {
		t.Fatalf("launch beyond the allowed: %v", err)
	}
	p.SetAllowedLaunches(-1)
	p.SetPartialLaunches(1)
	_, err := p.Launch(ctx, spec("c"))
	if !errors.Is(err, provisioner.ErrTransport) {
		t.Fatalf("partial launch: %v", err)
	}
	again, err := p.Launch(ctx, spec("c"))
	if err != nil || again.ID == "" {
		t.Fatalf("a partial launch made its instance; the retry must find it: %+v %v", again, err)
	}
	if n := len(p.Calls(fake.OpLaunch)); n != 5 {
		t.Fatalf("recorded %d launches, want 5", n)
	}
}

func TestHangUntilTheContextEnds(t *testing.T) {
	p := fake.New("fake", nil, nil)
	p.Hang(fake.OpList, true)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := p.List(ctx, provisioner.Filter{})
		done <- err
	}()
	if err := p.Await(context.Background(), func() bool { return p.InFlight(fake.OpList) == 1 }); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; !errors.Is(err, provisioner.ErrTransport) {
		t.Fatalf("hung list after cancel: %v", err)
	}
}
