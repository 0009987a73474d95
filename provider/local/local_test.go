package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/internal/proctest"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/provisioner/provisionertest"
)

// A stand-in agent: a shell loop that keeps its arguments (the instance id
// among them) in its command line, as the real agent does. The real agent
// runs under the local provider in the e2e tests.
const fakeAgent = "#!/bin/sh\nwhile :; do sleep 1; done\n"

func newProvider(t *testing.T, stateDir string) *Provider {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "fake-agent")
	if err := os.WriteFile(bin, []byte(fakeAgent), 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := New(Config{AgentBinary: bin, StateDir: stateDir, StopGrace: 2 * time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.ShutdownAll(context.Background()) })
	return p
}

func TestContract(t *testing.T) {
	provisionertest.RunWith(t, func(t *testing.T) provisioner.Provisioner { return newProvider(t, t.TempDir()) },
		provisionertest.Options{Timeout: 30 * time.Second, Poll: 20 * time.Millisecond})
}

func launchSpec(key string) provisioner.LaunchSpec {
	return provisioner.LaunchSpec{InstanceType: "local.small", IdempotencyKey: key,
		Tags:      map[string]string{"gantry.dev/cluster": "c", "gantry.dev/launch-key": key},
		Bootstrap: provisioner.Bootstrap{ServerURL: "http://127.0.0.1:1", Cluster: "c", Group: "g", MachineID: "m-" + key, JoinToken: "secret-token"}}
}

func waitState(t *testing.T, p *Provider, id string, want provisioner.State) *provisioner.Instance {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		inst, err := p.Describe(context.Background(), id)
		if err == nil && inst.State == want {
			return inst
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("instance %s never reached %s", id, want)
	return nil
}

func TestLaunchIsNonBlockingAndIdempotent(t *testing.T) {
	p := newProvider(t, t.TempDir())
	ctx := context.Background()
	first, err := p.Launch(ctx, launchSpec("k1"))
	if err != nil {
		t.Fatal(err)
	}
	if first.State != provisioner.StatePending {
		t.Fatalf("launch returned %s, want pending", first.State)
	}
	again, err := p.Launch(ctx, launchSpec("k1"))
	if err != nil || again.ID != first.ID {
		t.Fatalf("retried launch made %v (err %v), want the same %s", again, err, first.ID)
	}
	inst := waitState(t, p, first.ID, provisioner.StateRunning)
	if len(inst.Addresses) != 1 || inst.Zone != Zone || inst.InstanceType != "local.small" {
		t.Fatalf("instance: %+v", inst)
	}
	all, _ := p.List(ctx, provisioner.Filter{})
	if len(all) != 1 {
		t.Fatalf("%d instances after two launches with one key", len(all))
	}
	state, _ := os.ReadFile(filepath.Join(p.cfg.StateDir, "instances.json"))
	if len(state) == 0 || strings.Contains(string(state), "secret-token") {
		t.Fatal("state file missing, or it holds the join token")
	}
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.records[first.ID].PID))
	environ, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p.records[first.ID].PID))
	if strings.Contains(string(cmdline)+string(environ), "secret-token") {
		t.Fatal("the join token is visible in the agent's argv or environment")
	}
	tokenFile := filepath.Join(p.machineDir(first.ID), "join-token")
	if info, err := os.Stat(tokenFile); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("join token file: %v %v", info, err)
	}
}

func TestTerminateIsIdempotentAndListFiltersByTagsAndState(t *testing.T) {
	p := newProvider(t, t.TempDir())
	ctx := context.Background()
	a, _ := p.Launch(ctx, launchSpec("a"))
	b, _ := p.Launch(ctx, launchSpec("b"))
	waitState(t, p, a.ID, provisioner.StateRunning)
	waitState(t, p, b.ID, provisioner.StateRunning)

	byTag, _ := p.List(ctx, provisioner.Filter{Tags: map[string]string{"gantry.dev/launch-key": "a"}})
	if len(byTag) != 1 || byTag[0].ID != a.ID {
		t.Fatalf("list by tag: %+v", byTag)
	}
	none, _ := p.List(ctx, provisioner.Filter{Tags: map[string]string{"gantry.dev/launch-key": "zzz"}})
	if len(none) != 0 {
		t.Fatalf("non-matching tags found %d", len(none))
	}
	for i := 0; i < 2; i++ {
		if err := p.Terminate(ctx, a.ID); err != nil {
			t.Fatalf("terminate #%d: %v", i+1, err)
		}
	}
	if err := p.Terminate(ctx, "local-unknown"); err != nil {
		t.Fatalf("terminate of an unknown id: %v", err)
	}
	live, _ := p.List(ctx, provisioner.Filter{})
	if len(live) != 1 || live[0].ID != b.ID {
		t.Fatalf("list without states must leave terminated out: %+v", live)
	}
	dead, _ := p.List(ctx, provisioner.Filter{States: []provisioner.State{provisioner.StateTerminated}})
	if len(dead) != 1 || dead[0].ID != a.ID {
		t.Fatalf("list of terminated: %+v", dead)
	}
}

func TestStopStartAndRestartRecovery(t *testing.T) {
	dir := t.TempDir()
	p := newProvider(t, dir)
	ctx := context.Background()
	inst, _ := p.Launch(ctx, launchSpec("s"))
	waitState(t, p, inst.ID, provisioner.StateRunning)
	if err := p.Stop(ctx, inst.ID); err != nil {
		t.Fatal(err)
	}
	if got := waitState(t, p, inst.ID, provisioner.StateStopped); len(got.Addresses) != 0 {
		t.Fatalf("stopped instance keeps addresses %v", got.Addresses)
	}
	started, err := p.Start(ctx, inst.ID)
	if err != nil || started.State != provisioner.StateRunning || len(started.Addresses) == 0 {
		t.Fatalf("start: %+v %v", started, err)
	}
	// A second provider on the same state (a restarted server) sees the
	// running instance, adopts it, and can terminate it.
	p2, err := New(Config{AgentBinary: p.cfg.AgentBinary, StateDir: dir, StopGrace: 2 * time.Second, Logger: p.cfg.Logger})
	if err != nil {
		t.Fatal(err)
	}
	found, _ := p2.List(ctx, provisioner.Filter{Tags: map[string]string{"gantry.dev/launch-key": "s"}})
	if len(found) != 1 || found[0].State != provisioner.StateRunning {
		t.Fatalf("restarted provider lists %+v", found)
	}
	if err := p2.Terminate(ctx, inst.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Start(ctx, "local-nope"); !errors.Is(err, provisioner.ErrNotFound) {
		t.Fatalf("start unknown: %v", err)
	}
}

func TestInvalidLaunchSpecs(t *testing.T) {
	p := newProvider(t, t.TempDir())
	ctx := context.Background()
	noKey := launchSpec("")
	if _, err := p.Launch(ctx, noKey); !errors.Is(err, provisioner.ErrInvalid) {
		t.Fatalf("no key: %v", err)
	}
	badType := launchSpec("x")
	badType.InstanceType = "local.huge"
	if _, err := p.Launch(ctx, badType); !errors.Is(err, provisioner.ErrInvalid) {
		t.Fatalf("bad type: %v", err)
	}
	badZone := launchSpec("y")
	badZone.Zone = "mars-1"
	if _, err := p.Launch(ctx, badZone); !errors.Is(err, provisioner.ErrInsufficientCapacity) {
		t.Fatalf("bad zone: %v", err)
	}
}

// Terminating one machine while another boots: under -race this caught an
// unlocked read of the table the boot writes; either way each terminated
// instance ends with no process.
func TestTerminateWhileAnotherBoots(t *testing.T) {
	p := newProvider(t, t.TempDir())
	ctx := context.Background()
	var prev *provisioner.Instance
	for i := 0; i < 20; i++ {
		inst, err := p.Launch(ctx, launchSpec(fmt.Sprintf("race-%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		if prev != nil {
			if err := p.Terminate(ctx, prev.ID); err != nil { // inst boots meanwhile
				t.Fatal(err)
			}
			waitState(t, p, prev.ID, provisioner.StateTerminated)
		}
		waitState(t, p, inst.ID, provisioner.StateRunning)
		prev = inst
	}
}

// A server killed after starting a machine's agent but before saving its
// pid leaves a pending record without one: the provider finds the agent
// again by the instance id in its arguments, instead of believing the
// instance terminated while it runs (defect).
func TestAgentStartedButNotRecordedIsAdopted(t *testing.T) {
	dir := t.TempDir()
	p := newProvider(t, dir)
	inst, err := p.Launch(context.Background(), launchSpec("k1"))
	if err != nil {
		t.Fatal(err)
	}
	running := waitState(t, p, inst.ID, provisioner.StateRunning)
	pid := p.records[inst.ID].PID
	// What the killed server left: the record as it was before the start.
	p.mu.Lock()
	p.records[inst.ID].State, p.records[inst.ID].PID = provisioner.StatePending, 0
	if err := p.save(); err != nil {
		t.Fatal(err)
	}
	delete(p.leaders, inst.ID)
	p.mu.Unlock()

	again, err := New(p.cfg)
	if err != nil {
		t.Fatal(err)
	}
	got, err := again.Describe(context.Background(), inst.ID)
	if err != nil || got.State != provisioner.StateRunning || again.records[inst.ID].PID != pid || len(got.Addresses) == 0 {
		t.Fatalf("after restart: %+v %v (pid %d, want %d)", got, err, again.records[inst.ID].PID, pid)
	}
	if err := again.Terminate(context.Background(), running.ID); err != nil {
		t.Fatal(err)
	}
	if _, found := findAgent(inst.ID); found {
		t.Fatal("the adopted agent still runs after terminate")
	}
}

// An agent that writes its environment into its data dir, then idles.
const envDumpingAgent = `#!/bin/sh
for a in "$@"; do [ "$prev" = --data-dir ] && dir=$a; prev=$a; done
env > "$dir/env.txt"
while :; do sleep 1; done
`

// launchWithAgent launches a machine of a provider whose agent is the
// script.
func launchWithAgent(t *testing.T, name, script string) (*Provider, *provisioner.Instance) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := New(Config{AgentBinary: bin, StateDir: t.TempDir(), StopGrace: 2 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.ShutdownAll(context.Background()) })
	inst, err := p.Launch(context.Background(), launchSpec(name))
	if err != nil {
		t.Fatal(err)
	}
	return p, inst
}

// A local machine's agent gets an explicit, minimal environment: the
// server's admin token, encryption key and secret values stay with it.
func TestAgentsDoNotInheritTheServersEnvironment(t *testing.T) {
	t.Setenv("GANTRY_ADMIN_TOKEN", "admin-token-must-not-leak")
	t.Setenv("GANTRY_ENCRYPTION_KEY", "encryption-key-must-not-leak")
	t.Setenv("DB_PASSWORD", "secret-value-must-not-leak")
	p, inst := launchWithAgent(t, "env-agent", envDumpingAgent)
	waitState(t, p, inst.ID, provisioner.StateRunning)
	envFile := filepath.Join(p.machineDir(inst.ID), "env.txt")
	var env []byte
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if env, err = os.ReadFile(envFile); err == nil && strings.Contains(string(env), "PATH=") {
			break
		}
	}
	if !strings.Contains(string(env), "PATH=") {
		t.Fatalf("the agent's environment has no PATH: %q", env)
	}
	for _, leak := range []string{"must-not-leak", "GANTRY_ADMIN_TOKEN", "GANTRY_ENCRYPTION_KEY", "DB_PASSWORD"} {
		if strings.Contains(string(env), leak) {
			t.Fatalf("the agent's environment holds %s:\n%s", leak, env)
		}
	}
}

// stragglingAgent starts a helper, writes its pid into fifo and exits.
func stragglingAgent(fifo string) string {
	return fmt.Sprintf("#!/bin/sh\nsleep 300 &\necho $! > %q\nexit 1\n", fifo)
}

// An agent that exits takes what it left in its process group with it,
// killed before the agent is reaped: a kill of the group sent after the
// reap could reach another group that took its pid since.
func TestAnExitedAgentLeavesNoHelperRunning(t *testing.T) {
	fifo := proctest.PidFIFO(t)
	launchWithAgent(t, "straggling-agent", stragglingAgent(fifo))
	helper := proctest.ReadPid(t, fifo, 10*time.Second)
	if !proctest.Gone(helper, 10*time.Second) {
		_ = syscall.Kill(helper, syscall.SIGKILL)
		t.Fatalf("helper %d outlived its agent", helper)
	}
}
