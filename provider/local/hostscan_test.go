package local

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/provider/local/localtest"
	"github.com/gantry-dev/gantry/provisioner"
)

// TestMain lets the test binary stand in for `gantry agent`.
func TestMain(m *testing.M) {
	localtest.StandInForAgent()
	os.Exit(m.Run())
}

func hostProvider(t *testing.T, installation string) *Provider {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(Config{AgentBinary: exe, StateDir: t.TempDir(), StopGrace: 2 * time.Second, Installation: installation, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Each server of an installation keeps its own data dir: a server that
// takes over must find the machines another one launched the way a cloud
// lets it, by their tags, from the host — and must never take machines of
// another installation on the same host.
func TestAnotherServerFindsTheMachinesByTheirTags(t *testing.T) {
	ctx := context.Background()
	a := hostProvider(t, "inst-1")
	spec := launchSpec("k1")
	spec.Tags = map[string]string{provisioner.TagManagedBy: provisioner.ManagedByValue, provisioner.TagInstallation: "inst-1",
		provisioner.TagMachine: "m-k1", provisioner.TagLaunchKey: "k1"}
	inst, err := a.Launch(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Terminate(ctx, inst.ID) })
	waitState(t, a, inst.ID, provisioner.StateRunning)

	other := hostProvider(t, "inst-2")
	if found, _ := other.List(ctx, provisioner.Filter{}); len(found) != 0 {
		t.Fatalf("another installation's server found %v", found)
	}
	other.ShutdownAll(ctx)

	b := hostProvider(t, "inst-1")
	found, err := b.List(ctx, provisioner.Filter{Tags: map[string]string{provisioner.TagInstallation: "inst-1"}})
	if err != nil || len(found) != 1 {
		t.Fatalf("the other server of the installation listed %v (%v), want the machine", found, err)
	}
	got := found[0]
	if got.ID != inst.ID || got.State != provisioner.StateRunning || got.InstanceType != "local.small" || got.Tags[provisioner.TagMachine] != "m-k1" {
		t.Fatalf("found %+v", got)
	}
	if d, err := b.Describe(ctx, inst.ID); err != nil || d.State != provisioner.StateRunning {
		t.Fatalf("describe by the other server: %+v %v", d, err)
	}
	if err := b.Terminate(ctx, inst.ID); err != nil {
		t.Fatal(err)
	}
	waitState(t, a, inst.ID, provisioner.StateTerminated)
}

func TestParseAgentArguments(t *testing.T) {
	argv := []string{"/usr/bin/gantry", "agent", "--server", "https://s", "--provider-id", "local-ab12", "--instance-type", "local.small",
		"--capacity-type", "onDemand", "--tag", "gantry.dev/managed-by=gantry", "--tag", "gantry.dev/machine=m1", "--join-token-file", "/x/join-token", "--runtime", "process"}
	a, ok := parseAgent(argv)
	if !ok || a.id != "local-ab12" || a.instanceType != "local.small" || a.tags["gantry.dev/machine"] != "m1" {
		t.Fatalf("parsed %+v %v", a, ok)
	}
	for _, arg := range a.args {
		if arg == "--join-token-file" || arg == "/x/join-token" {
			t.Fatalf("a restart would use the join token again: %v", a.args)
		}
	}
	if a.args[0] != "agent" || a.args[len(a.args)-1] != "process" {
		t.Fatalf("args %v", a.args)
	}
	if _, ok := parseAgent([]string{"/bin/sleep", "agent", "--provider-id", "local-1"}); ok {
		t.Fatal("a process without Gantry's tags was taken for an agent")
	}
}
