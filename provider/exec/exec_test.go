package exec_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	execprov "github.com/gantry-dev/gantry/provider/exec"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/provisioner/provisionertest"
)

// TestMain lets the test binary stand in for `gantry agent` in the
// example script's machines: it calls its --server once (a test may wait
// for that call: the agent runs), then idles until stopped.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "agent" {
		for i, arg := range os.Args {
			if arg == "--server" && i+1 < len(os.Args) {
				if resp, err := http.Post(os.Args[i+1]+"/v1/join", "application/json", strings.NewReader("{}")); err == nil {
					resp.Body.Close()
				}
			}
		}
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
		<-stop
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// scriptConfig runs examples/exec/process-machines.sh for every operation.
func scriptConfig(t *testing.T) execprov.Config {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	script, err := filepath.Abs("../../examples/exec/process-machines.sh")
	if err != nil {
		t.Fatal(err)
	}
	machines := t.TempDir()
	prefix := fmt.Sprintf("MACHINES_DIR=%s GANTRY_BIN=%s %s ", shellQuote(machines), shellQuote(exe), shellQuote(script))
	t.Cleanup(func() { killAll(machines) })
	return execprov.Config{
		Commands: execprov.Commands{Launch: prefix + "launch", Terminate: prefix + "terminate", Describe: prefix + "describe",
			List: prefix + "list", Stop: prefix + "stop", Start: prefix + "start"},
		InstanceTypes: []provisioner.InstanceType{{Name: "pm.small", MilliCPU: 1000, MemoryBytes: 1 << 30}},
		Zones:         []string{"here"}, FlatPrice: 0.01, Timeout: 30 * time.Second, StateDir: t.TempDir(),
	}
}

// killAll stops every machine process the script started.
func killAll(dir string) {
	pids, _ := filepath.Glob(filepath.Join(dir, "pm-*", "pid"))
	for _, f := range pids {
		data, _ := os.ReadFile(f)
		var pid int
		if _, err := fmt.Sscan(string(data), &pid); err == nil && pid > 0 {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
	}
}

func newProvider(t *testing.T, cfg execprov.Config) *execprov.Provider {
	t.Helper()
	p, err := execprov.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestContractWithTheExampleScript(t *testing.T) {
	provisionertest.RunWith(t, func(t *testing.T) provisioner.Provisioner { return newProvider(t, scriptConfig(t)) },
		provisionertest.Options{Timeout: 30 * time.Second})
}

// Without describe and list commands the provider answers from its
// records, and still passes the contract.
func TestContractWithLaunchAndTerminateOnly(t *testing.T) {
	provisionertest.RunWith(t, func(t *testing.T) provisioner.Provisioner {
		cfg := scriptConfig(t)
		cfg.Commands.Describe, cfg.Commands.List = "", ""
		return newProvider(t, cfg)
	}, provisionertest.Options{Timeout: 30 * time.Second})
}

// Hostile tags and labels reach the script as data: nothing they contain
// is executed, and they come back intact.
func TestNoShellInjectionThroughTagsOrLabels(t *testing.T) {
	cfg := scriptConfig(t)
	canary := filepath.Join(t.TempDir(), "pwned")
	// The template itself uses placeholders too, in the places a careless
	// template would interpolate them.
	cfg.Commands.Launch = "echo {{tags}} {{labels}} {{tags_json}} >/dev/null; " + cfg.Commands.Launch
	p := newProvider(t, cfg)
	hostile := map[string]string{
		provisioner.TagManagedBy: provisioner.ManagedByValue,
		"a":                      "$(touch " + canary + ")",
		"b":                      "`touch " + canary + "`",
		"c":                      "'; touch " + canary + "; '",
		"d":                      "\"; touch " + canary + "; \"",
		"e":                      "x\ntouch " + canary,
	}
	inst, err := p.Launch(context.Background(), provisioner.LaunchSpec{InstanceType: "pm.small", IdempotencyKey: "inject-1", Tags: hostile,
		Bootstrap: provisioner.Bootstrap{ServerURL: "http://127.0.0.1:9", Cluster: "c", Group: "g", MachineID: "m-inject", JoinToken: "t"}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Terminate(context.Background(), inst.ID)
	if _, err := os.Stat(canary); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a tag value was executed by the shell")
	}
	list, err := p.List(context.Background(), provisioner.Filter{Tags: map[string]string{"a": hostile["a"]}})
	if err != nil || len(list) != 1 {
		t.Fatalf("list by a hostile tag: %v %v", list, err)
	}
	for k, v := range hostile {
		if list[0].Tags[k] != v {
			t.Errorf("tag %s came back as %q, want %q", k, list[0].Tags[k], v)
		}
	}
}

func TestExitStatusesAndStderrAreTypedErrors(t *testing.T) {
	base := execprov.Config{InstanceTypes: []provisioner.InstanceType{{Name: "t", MilliCPU: 1000, MemoryBytes: 1 << 30}}, FlatPrice: 1, StateDir: t.TempDir(),
		Commands: execprov.Commands{Terminate: "true"}}
	spec := provisioner.LaunchSpec{InstanceType: "t", IdempotencyKey: "k"}
	for _, tc := range []struct {
		launch string
		kind   provisioner.ErrorKind
		want   string
	}{
		{"echo no capacity in zone >&2; exit 3", provisioner.KindInsufficientCapacity, "no capacity in zone"},
		{"echo token expired >&2; exit 4", provisioner.KindAuth, "token expired"},
		{"echo boom >&2; exit 1", provisioner.KindTransport, "boom"},
		{"echo 'not an id!'", provisioner.KindTransport, "provider id"},
		{"sleep 10", provisioner.KindTransport, "timed out"},
	} {
		cfg := base
		cfg.Commands.Launch, cfg.Timeout = tc.launch, 500*time.Millisecond
		p := newProvider(t, cfg)
		_, err := p.Launch(context.Background(), spec)
		if provisioner.KindOf(err) != tc.kind || err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("launch %q: %v, want kind %s with %q", tc.launch, err, tc.kind, tc.want)
		}
	}
}

func TestConfigValidationNamesTheField(t *testing.T) {
	types := []provisioner.InstanceType{{Name: "t", MilliCPU: 1000, MemoryBytes: 1 << 30}}
	for want, cfg := range map[string]execprov.Config{
		"commands.launch: required":          {Commands: execprov.Commands{Terminate: "x"}, InstanceTypes: types, FlatPrice: 1},
		"commands.terminate: required":       {Commands: execprov.Commands{Launch: "x"}, InstanceTypes: types, FlatPrice: 1},
		"commands.stop and commands.start":   {Commands: execprov.Commands{Launch: "x", Terminate: "y", Stop: "z"}, InstanceTypes: types, FlatPrice: 1},
		"unknown placeholder {{password}}":   {Commands: execprov.Commands{Launch: "x {{password}}", Terminate: "y"}, InstanceTypes: types, FlatPrice: 1},
		"instanceTypes: at least one":        {Commands: execprov.Commands{Launch: "x", Terminate: "y"}},
		"instanceTypes[0] (t): no offerings": {Commands: execprov.Commands{Launch: "x", Terminate: "y"}, InstanceTypes: types},
	} {
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want %q, got %v", want, err)
		}
	}
}

// The example script runs the agent binary the cluster's
// spec.agent.binaries names for this host (checked against its SHA-256),
// with the runtime the server plans with; a binary whose digest differs
// is refused and no machine starts.
func TestExampleScriptRunsTheClustersAgentBinary(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	body, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(body) }))
	t.Cleanup(srv.Close)
	// The agent's first call (its join) says it runs: setsid has exec'd it.
	joined := make(chan struct{}, 1)
	control := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case joined <- struct{}{}:
		default:
		}
		http.Error(w, "not a gantry server", http.StatusServiceUnavailable)
	}))
	t.Cleanup(control.Close)
	arch := map[string]string{"amd64": "amd64", "arm64": "arm64"}[goruntime.GOARCH]
	if arch == "" {
		t.Skipf("no agent binaries for %s", goruntime.GOARCH)
	}
	digest := fmt.Sprintf("%x", sha256.Sum256(body))
	cfg := scriptConfig(t)
	cfg.AgentRuntime = "process"
	cfg.Commands.Launch = strings.Replace(cfg.Commands.Launch, "GANTRY_BIN=", "GANTRY_UNUSED=", 1)
	p := newProvider(t, cfg)
	launch := func(key, sum string) (*provisioner.Instance, error) {
		return p.Launch(context.Background(), provisioner.LaunchSpec{InstanceType: "pm.small", IdempotencyKey: key,
			Bootstrap: provisioner.Bootstrap{ServerURL: control.URL, Cluster: "c", Group: "g", MachineID: "m-" + key, JoinToken: "t",
				AgentBinaries: map[string]api.AgentBinary{arch: {URL: srv.URL + "/gantry", SHA256: sum}}}})
	}
	inst, err := launch("bin-1", digest)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Terminate(context.Background(), inst.ID)
	machines := strings.Split(strings.Split(cfg.Commands.Launch, "MACHINES_DIR='")[1], "'")[0]
	dir := filepath.Join(machines, inst.ID)
	pidText, err := os.ReadFile(filepath.Join(dir, "pid"))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-joined:
	case <-time.After(time.Minute):
		agentLog, _ := os.ReadFile(filepath.Join(dir, "agent.log"))
		t.Fatalf("the machine's agent never called the server; its log:\n%s", agentLog)
	}
	exeLink, err := os.Readlink(fmt.Sprintf("/proc/%s/exe", strings.TrimSpace(string(pidText))))
	if err != nil || exeLink != filepath.Join(dir, "gantry") {
		t.Fatalf("the machine runs %q (%v), want the downloaded %s", exeLink, err, filepath.Join(dir, "gantry"))
	}
	args, _ := os.ReadFile(filepath.Join(dir, "args"))
	if !strings.Contains(string(args), "--runtime process") {
		t.Fatalf("agent arguments %q lack the configured runtime", args)
	}
	if _, err := launch("bin-2", strings.Repeat("0", 64)); err == nil || !strings.Contains(err.Error(), "SHA-256") {
		t.Fatalf("a binary with another digest: %v, want a refusal naming SHA-256", err)
	}
}

// Network mode routed: the route command routes the machine's /24 once
// it is launched (a failed one fails the launch, and the launch tried
// again routes it), the unroute command takes the route away once it is
// terminated, and a machine of a cluster in another mode is not routed.
func TestRouteCommandsFollowTheMachine(t *testing.T) {
	dir := t.TempDir()
	log, fail := filepath.Join(dir, "routes.log"), filepath.Join(dir, "fail")
	cfg := execprov.Config{
		Commands: execprov.Commands{Launch: "echo id-{{idempotency_key}}", Terminate: "true",
			Route:   "echo route {{provider_id}} {{subnet}} >> " + shellQuote(log) + "; test ! -e " + shellQuote(fail),
			Unroute: "echo unroute {{provider_id}} {{subnet}} >> " + shellQuote(log)},
		InstanceTypes: []provisioner.InstanceType{{Name: "t", MilliCPU: 1000, MemoryBytes: 1 << 30}}, FlatPrice: 1, StateDir: t.TempDir(),
	}
	p := newProvider(t, cfg)
	if err := os.WriteFile(fail, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	routed := provisioner.LaunchSpec{InstanceType: "t", IdempotencyKey: "k1", Subnet: "10.244.7.0/24",
		Bootstrap: provisioner.Bootstrap{ServerURL: "http://127.0.0.1:1", Cluster: "c", Group: "g", MachineID: "m1", NetworkMode: api.NetworkRouted}}
	ctx := context.Background()
	if _, err := p.Launch(ctx, routed); err == nil {
		t.Fatal("launch whose route command failed: no error")
	}
	if err := os.Remove(fail); err != nil {
		t.Fatal(err)
	}
	for range 2 { // routed by the first; the second finds it routed
		if _, err := p.Launch(ctx, routed); err != nil {
			t.Fatal(err)
		}
	}
	hostMode := routed
	hostMode.IdempotencyKey, hostMode.Bootstrap.NetworkMode = "k2", api.NetworkHost
	if _, err := p.Launch(ctx, hostMode); err != nil {
		t.Fatal(err)
	}
	if err := p.Terminate(ctx, "id-k1"); err != nil {
		t.Fatal(err)
	}
	if err := p.Terminate(ctx, "id-k2"); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(log)
	want := "route id-k1 10.244.7.0/24\nroute id-k1 10.244.7.0/24\nunroute id-k1 10.244.7.0/24\n"
	if string(got) != want {
		t.Fatalf("route commands ran:\n%s\nwant:\n%s", got, want)
	}
}
