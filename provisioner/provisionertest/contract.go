// Package provisionertest is the contract every provisioner must honour.
// A provider runs it from its own tests:
//
//	func TestContract(t *testing.T) {
//		provisionertest.Run(t, func(t *testing.T) provisioner.Provisioner { return newProvider(t) })
//	}
//
// The factory returns a fresh provider; the suite launches real instances
// through it and cleans them up.
package provisionertest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/provisioner"
)

// Options tune the suite for slow providers.
type Options struct {
	// Timeout bounds each wait for a state (default 2 minutes).
	Timeout time.Duration
	// Poll is the interval between Describe calls (default 100ms).
	Poll time.Duration
	// Spec, when set, adjusts the launch spec the suite uses (for example a
	// provider that needs an image or a subnet in its settings).
	Spec func(*provisioner.LaunchSpec)
}

// Run runs the contract with default options.
func Run(t *testing.T, factory func(t *testing.T) provisioner.Provisioner) {
	RunWith(t, factory, Options{})
}

// RunWith runs the contract.
func RunWith(t *testing.T, factory func(t *testing.T) provisioner.Provisioner, opts Options) {
	if opts.Timeout == 0 {
		opts.Timeout = 2 * time.Minute
	}
	if opts.Poll == 0 {
		opts.Poll = 100 * time.Millisecond
	}
	cases := []struct {
		name string
		fn   func(*suite)
	}{
		{"LaunchReturnsWhilePending", (*suite).launchReturnsWhilePending},
		{"DescribeIsConsistent", (*suite).describeIsConsistent},
		{"RetriedLaunchReturnsTheSameInstance", (*suite).retriedLaunch},
		{"TerminateIsIdempotent", (*suite).terminateIsIdempotent},
		{"TerminateUnknownIsNotAnError", (*suite).terminateUnknown},
		{"DescribeUnknownIsNotFound", (*suite).describeUnknown},
		{"ListByTags", (*suite).listByTags},
		{"ListLeavesTerminatedOut", (*suite).listLeavesTerminatedOut},
		{"StopThenStart", (*suite).stopThenStart},
		{"InvalidLaunchSpecIsAnError", (*suite).invalidSpec},
		{"CatalogIsUsable", (*suite).catalogIsUsable},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := &suite{t: t, p: factory(t), opts: opts, ctx: context.Background()}
			c.fn(s)
		})
	}
}

type suite struct {
	t    *testing.T
	p    provisioner.Provisioner
	opts Options
	ctx  context.Context
}

func (s *suite) spec(key string) provisioner.LaunchSpec {
	s.t.Helper()
	types := s.p.InstanceTypes()
	if len(types) == 0 {
		s.t.Fatal("provider has an empty catalog")
	}
	it := types[0]
	spec := provisioner.LaunchSpec{
		InstanceType: it.Name, IdempotencyKey: key,
		Tags: map[string]string{provisioner.TagManagedBy: provisioner.ManagedByValue, "contract/key": key, "contract/test": s.t.Name()},
		Bootstrap: provisioner.Bootstrap{ServerURL: "http://127.0.0.1:9", Cluster: "contract", Group: "g", MachineID: "m-" + key, JoinToken: "contract-token",
			TemplateVersion: "contract", AgentBinaries: map[string]api.AgentBinary{"amd64": {URL: "https://downloads.example.com/gantry", SHA256: strings.Repeat("0", 64)}}},
	}
	if len(it.Offerings) > 0 {
		spec.Zone, spec.CapacityType = it.Offerings[0].Zone, it.Offerings[0].CapacityType
	}
	if s.opts.Spec != nil {
		s.opts.Spec(&spec)
	}
	return spec
}

func (s *suite) launch(key string) *provisioner.Instance {
	s.t.Helper()
	inst, err := s.p.Launch(s.ctx, s.spec(key))
	if err != nil {
		s.t.Fatalf("launch: %v", err)
	}
	if inst.ID == "" {
		s.t.Fatal("launch returned an instance without an id")
	}
	s.t.Cleanup(func() { _ = s.p.Terminate(context.Background(), inst.ID) })
	return inst
}

func (s *suite) key() string { return fmt.Sprintf("k%d", time.Now().UnixNano()) }

// waitFor polls Describe until the state is one of want.
func (s *suite) waitFor(id string, want ...provisioner.State) *provisioner.Instance {
	s.t.Helper()
	deadline := time.Now().Add(s.opts.Timeout)
	var last provisioner.State
	for time.Now().Before(deadline) {
		inst, err := s.p.Describe(s.ctx, id)
		if err == nil {
			last = inst.State
			for _, w := range want {
				if inst.State == w {
					return inst
				}
			}
		} else if !errors.Is(err, provisioner.ErrNotFound) {
			s.t.Fatalf("describe %s: %v", id, err)
		}
		time.Sleep(s.opts.Poll)
	}
	s.t.Fatalf("instance %s stayed %q, want one of %v", id, last, want)
	return nil
}

func (s *suite) launchReturnsWhilePending() {
	inst := s.launch(s.key())
	if inst.State != provisioner.StatePending {
		s.t.Fatalf("Launch returned state %q: it must return while the instance is pending", inst.State)
	}
	s.waitFor(inst.ID, provisioner.StateRunning)
}

func (s *suite) describeIsConsistent() {
	key := s.key()
	inst := s.launch(key)
	got := s.waitFor(inst.ID, provisioner.StateRunning)
	spec := s.spec(key)
	if got.ID != inst.ID || got.InstanceType != spec.InstanceType {
		s.t.Fatalf("describe: %+v, launched %+v", got, inst)
	}
	for k, v := range spec.Tags {
		if got.Tags[k] != v {
			s.t.Fatalf("tag %s = %q, launched with %q", k, got.Tags[k], v)
		}
	}
	if got.LaunchedAt.IsZero() {
		s.t.Fatal("describe: no launch time")
	}
	for _, tag := range got.Tags {
		if tag == "contract-token" {
			s.t.Fatal("the join token leaked into the instance's tags")
		}
	}
}

func (s *suite) retriedLaunch() {
	key := s.key()
	first := s.launch(key)
	second, err := s.p.Launch(s.ctx, s.spec(key))
	if err != nil {
		s.t.Fatalf("retried launch: %v", err)
	}
	if second.ID != first.ID {
		s.t.Fatalf("a retried launch with the same key made a second instance: %s and %s", first.ID, second.ID)
	}
	list, err := s.p.List(s.ctx, provisioner.Filter{Tags: map[string]string{"contract/key": key}})
	if err != nil || len(list) != 1 {
		s.t.Fatalf("list after a retried launch: %d instances, %v", len(list), err)
	}
}

func (s *suite) terminateIsIdempotent() {
	inst := s.launch(s.key())
	s.waitFor(inst.ID, provisioner.StateRunning)
	for i := 0; i < 2; i++ {
		if err := s.p.Terminate(s.ctx, inst.ID); err != nil {
			s.t.Fatalf("terminate #%d: %v", i+1, err)
		}
	}
	s.waitFor(inst.ID, provisioner.StateTerminated)
	if err := s.p.Terminate(s.ctx, inst.ID); err != nil {
		s.t.Fatalf("terminate of a terminated instance: %v", err)
	}
}

func (s *suite) terminateUnknown() {
	if err := s.p.Terminate(s.ctx, "no-such-instance-0000"); err != nil {
		s.t.Fatalf("terminate of an unknown id must not fail: %v", err)
	}
}

func (s *suite) describeUnknown() {
	_, err := s.p.Describe(s.ctx, "no-such-instance-0000")
	if !errors.Is(err, provisioner.ErrNotFound) {
		s.t.Fatalf("describe of an unknown id: %v, want ErrNotFound", err)
	}
}

func (s *suite) listByTags() {
	key := s.key()
	inst := s.launch(key)
	found, err := s.p.List(s.ctx, provisioner.Filter{Tags: map[string]string{"contract/key": key, provisioner.TagManagedBy: provisioner.ManagedByValue}})
	if err != nil || len(found) != 1 || found[0].ID != inst.ID {
		s.t.Fatalf("list by matching tags: %+v, %v", found, err)
	}
	none, err := s.p.List(s.ctx, provisioner.Filter{Tags: map[string]string{"contract/key": key + "-other"}})
	if err != nil || len(none) != 0 {
		s.t.Fatalf("list by non-matching tags: %+v, %v", none, err)
	}
}

func (s *suite) listLeavesTerminatedOut() {
	key := s.key()
	inst := s.launch(key)
	s.waitFor(inst.ID, provisioner.StateRunning)
	if err := s.p.Terminate(s.ctx, inst.ID); err != nil {
		s.t.Fatal(err)
	}
	s.waitFor(inst.ID, provisioner.StateTerminated)
	byKey := map[string]string{"contract/key": key}
	live, err := s.p.List(s.ctx, provisioner.Filter{Tags: byKey})
	if err != nil || len(live) != 0 {
		s.t.Fatalf("list without states shows a terminated instance: %+v, %v", live, err)
	}
	dead, err := s.p.List(s.ctx, provisioner.Filter{Tags: byKey, States: []provisioner.State{provisioner.StateTerminated}})
	if err != nil || len(dead) != 1 {
		s.t.Fatalf("list of terminated instances: %+v, %v", dead, err)
	}
}

func (s *suite) stopThenStart() {
	stopper, ok := s.p.(provisioner.Stopper)
	if !ok {
		s.t.Skip("provider does not implement provisioner.Stopper")
	}
	inst := s.launch(s.key())
	s.waitFor(inst.ID, provisioner.StateRunning)
	if err := stopper.Stop(s.ctx, inst.ID); errors.Is(err, provisioner.ErrUnsupported) {
		s.t.Skip("provider does not support stop/start")
	} else if err != nil {
		s.t.Fatalf("stop: %v", err)
	}
	s.waitFor(inst.ID, provisioner.StateStopped)
	started, err := stopper.Start(s.ctx, inst.ID)
	if err != nil {
		s.t.Fatalf("start: %v", err)
	}
	if started.ID != inst.ID {
		s.t.Fatalf("start returned %s for %s", started.ID, inst.ID)
	}
	running := s.waitFor(inst.ID, provisioner.StateRunning)
	if len(running.Addresses) == 0 {
		s.t.Fatal("a started instance has no address (Start may change addresses, but must report them)")
	}
}

func (s *suite) invalidSpec() {
	noKey := s.spec("")
	if _, err := s.p.Launch(s.ctx, noKey); err == nil {
		s.t.Fatal("launch without an idempotency key succeeded")
	}
	badType := s.spec(s.key())
	badType.InstanceType = "no-such-type"
	if _, err := s.p.Launch(s.ctx, badType); err == nil {
		s.t.Fatal("launch of an unknown instance type succeeded")
	}
}

func (s *suite) catalogIsUsable() {
	for _, it := range s.p.InstanceTypes() {
		if it.Name == "" || it.MilliCPU <= 0 || it.MemoryBytes <= 0 || len(it.Offerings) == 0 {
			s.t.Fatalf("catalog entry %+v: want a name, CPU, memory and at least one offering", it)
		}
	}
	if s.p.Name() == "" {
		s.t.Fatal("no name")
	}
}
