package server

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	execprov "github.com/gantry-dev/gantry/provider/exec"
	"github.com/gantry-dev/gantry/provisioner"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/provider/local"
	"github.com/gantry-dev/gantry/provider/registry"
)

const execBase = `commands: {launch: "true", terminate: "true"}
instanceTypes: [{name: t, milliCpu: 1000, memoryBytes: 1073741824}]
flatPrice: 0.01
`

// The exec provider's machines offer the runtime its settings name, with
// or without an agent block: the planner needs it before any agent
// reports, or demand never launches a machine.
func TestExecRuntimeReachesThePlanner(t *testing.T) {
	cases := map[string]struct{ extra, want string }{
		"default":              {"", "docker"},
		"runtime alone":        {"runtime: process\n", "process"},
		"agent block's":        {"agent: {runtime: process}\n", "process"},
		"both, agreeing":       {"runtime: process\nagent: {runtime: process}\n", "process"},
		"runtime, agent block": {"runtime: process\nagent: {extraArgs: [--verbose]}\n", "process"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "exec.yaml")
			if err := os.WriteFile(path, []byte(execBase+c.extra), 0o600); err != nil {
				t.Fatal(err)
			}
			_, runtime, err := loadExec(path, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			entries := BuiltinProviders(Instances{ExecRuntime: runtime})
			for _, e := range entries {
				if e.Name == "exec" && (len(e.Runtimes) != 1 || e.Runtimes[0] != c.want) {
					t.Fatalf("exec machines offer %v, want [%s]", e.Runtimes, c.want)
				}
			}
		})
	}
	for extra, want := range map[string]string{
		"runtime: kata\n": "runtime: want docker or process",
		"runtime: process\nagent: {runtime: docker}\n": "disagree",
	} {
		path := filepath.Join(t.TempDir(), "exec.yaml")
		if err := os.WriteFile(path, []byte(execBase+extra), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, _, err := loadExec(path, t.TempDir()); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error with %q", extra, err, want)
		}
	}
}

// Routed mode is refused where the provider's network does not route each
// machine's /24: docker and exec always, local unless its machines sit in
// network namespaces on a bridge of the host; offline validation (no
// instances) leaves local to the server.
func TestRoutedModeOnlyWhereTheProviderRoutes(t *testing.T) {
	plain, err := local.New(local.Config{StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	inNamespaces, err := local.New(local.Config{StateDir: t.TempDir(), Netns: &local.Netns{Bridge: "gb-test", Prefix: netip.MustParsePrefix("172.31.250.0/24")}})
	if err != nil {
		t.Fatal(err)
	}
	execWith := func(route, unroute string) *execprov.Provider {
		p, err := execprov.New(execprov.Config{Commands: execprov.Commands{Launch: "true", Terminate: "true", Route: route, Unroute: unroute},
			InstanceTypes: []provisioner.InstanceType{{Name: "t", MilliCPU: 1000, MemoryBytes: 1 << 30}}, FlatPrice: 1, StateDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for name, c := range map[string]struct {
		in       Instances
		provider string
		refused  string
	}{
		"docker":                   {Instances{}, "docker", "provider docker does not route"},
		"exec, described only":     {Instances{}, "exec", "provider exec does not route"},
		"exec without route hooks": {Instances{Exec: execWith("", "")}, "exec", "commands.route and commands.unroute"},
		"exec with route hooks":    {Instances{Exec: execWith("ip route replace {{subnet}} via 192.0.2.1", "ip route del {{subnet}}")}, "exec", ""},
		"local, plain processes":   {Instances{Local: plain}, "local", "--local-netns-bridge"},
		"local, namespaces":        {Instances{Local: inNamespaces}, "local", ""},
		"local, described only":    {Instances{}, "local", ""},
	} {
		t.Run(name, func(t *testing.T) {
			err := registry.New(nil, BuiltinProviders(c.in)...).Routes(api.ProviderSpec{Name: c.provider})
			if c.refused == "" && err != nil || c.refused != "" && (err == nil || !strings.Contains(err.Error(), c.refused)) {
				t.Fatalf("routed on %s: %v, want %q", c.provider, err, c.refused)
			}
		})
	}
}

// A new cluster that names no network mode gets its provider's: overlay
// for exec (its machines may sit anywhere), host for local. An existing
// cluster applied again without one keeps the mode it has: a default that
// changed must not roll its machines.
func TestNewClustersGetTheirProvidersNetworkMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "exec.yaml")
	if err := os.WriteFile(path, []byte(execBase), 0o600); err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, func(c *Config) { c.ExecConfig = path })
	ctx := context.Background()
	cluster := func(name, provider, extra string) []byte {
		return []byte("kind: Cluster\nmetadata: {name: " + name + "}\nspec:\n  provider: {name: " + provider + "}\n" + extra +
			"  capacityGroups: [{groupId: g, instanceType: " + map[string]string{"exec": "t", "local": "local.small"}[provider] + ", minSize: 0, maxSize: 1}]\n")
	}
	mode := func(name string) string {
		c, err := ts.admin.GetCluster(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return c.NetworkMode()
	}
	for _, doc := range [][]byte{cluster("anywhere", "exec", ""), cluster("here", "local", ""), cluster("pinned", "exec", "  network: {mode: host}\n")} {
		if _, err := ts.admin.Apply(ctx, doc); err != nil {
			t.Fatal(err)
		}
	}
	if got := mode("anywhere"); got != api.NetworkOverlay {
		t.Errorf("a new exec cluster: %s, want overlay", got)
	}
	if got := mode("here"); got != api.NetworkHost {
		t.Errorf("a new local cluster: %s, want host", got)
	}
	if _, err := ts.admin.Apply(ctx, cluster("pinned", "exec", "")); err != nil {
		t.Fatal(err)
	}
	if got := mode("pinned"); got != api.NetworkHost {
		t.Errorf("an existing host cluster applied without a mode: %s, want host kept", got)
	}
}
