package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/server"
	"github.com/gantry-dev/gantry/sim"
)

const examplesDir = "../../../examples/"

// simulate runs gantry simulate on the bundled example with args after
// it, and returns stdout, stderr and the exit code.
func simulate(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	base := []string{"simulate", "-f", examplesDir + "simulate/shop.yaml", "--catalog", examplesDir + "catalog.json"}
	var out, errOut bytes.Buffer
	code := Execute(append(base, args...), &out, &errOut)
	return out.String(), errOut.String(), code
}

// The README's simulation: two policies over the bundled trace, side by
// side, plotted; spot with a fallback costs less than on demand.
func TestSimulateTheBundledExample(t *testing.T) {
	plot := filepath.Join(t.TempDir(), "sim.svg")
	out, errOut, code := simulate(t, "--trace", examplesDir+"simulate/demand.csv", "--until", "2026-03-03T00:00:00Z",
		"--policy", examplesDir+"simulate/on-demand.yaml", "--policy", examplesDir+"simulate/spot.yaml", "-o", "json", "--plot", plot)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got struct{ Results []sim.Result }
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Results) != 2 || got.Results[0].Policy != "on-demand" || got.Results[1].Policy != "spot" {
		t.Fatalf("results: %+v", got.Results)
	}
	od, spot := got.Results[0], got.Results[1]
	if od.Cost <= 0 || spot.Cost <= 0 || spot.Cost >= od.Cost {
		t.Errorf("on demand $%.2f, spot $%.2f: want spot cheaper", od.Cost, spot.Cost)
	}
	for _, th := range od.MachineHours {
		if th.CapacityType != "onDemand" {
			t.Errorf("the on-demand policy ran %+v", th)
		}
	}
	svg, err := os.ReadFile(plot)
	if err != nil || !bytes.Contains(svg, []byte("<svg")) {
		t.Fatalf("plot: %v, %d bytes", err, len(svg))
	}
}

// A stopped warm pool over the bundled example settles: a machine
// started again out of the pool was idle from before it was stopped, and
// a pass stopped it again at once, before the replicas it was started
// for came to it (a million passes in three days, each the undoing of
// the last). The loop is told of every instant it did not settle at.
func TestSimulateAStoppedWarmPoolSettles(t *testing.T) {
	policy := filepath.Join(t.TempDir(), "warm.yaml")
	if err := os.WriteFile(policy, []byte("name: warm\nwarm-pool: 3\nwarm-pool-state: stopped\nempty-machine-ttl: 5m\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := simulate(t, "--trace", examplesDir+"simulate/demand.csv", "--until", "2026-03-03T00:00:00Z", "--policy", policy, "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got struct{ Results []sim.Result }
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	res := got.Results[0]
	if res.Passes.Unsettled != 0 || strings.Contains(errOut, "warning") {
		t.Fatalf("the loop did not settle at %d instants (%d passes): %s", res.Passes.Unsettled, res.Passes.Total, errOut)
	}
	if res.Disruptions.MachinesEmptied == 0 {
		t.Errorf("no machine went into the pool: %+v", res.Disruptions)
	}
}

// Bad input is refused before anything runs, naming the row, key or
// field.
func TestSimulateRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	good := write("good.csv", "time,service,replicas\n2026-03-02T00:00:00Z,web,2\n2026-03-02T01:00:00Z,web,3\n")
	for _, c := range []struct {
		name string
		args []string
		want []string
	}{
		{"unknown service", []string{"--trace", write("a.csv", "time,service,replicas\n2026-03-02T00:00:00Z,shop,2\n")}, []string{"line 2", "shop"}},
		{"negative count", []string{"--trace", write("b.csv", "time,service,replicas\n2026-03-02T00:00:00Z,web,-2\n")}, []string{"line 2", "replicas"}},
		{"no zone", []string{"--trace", write("c.csv", "time,service,replicas\n2026-03-02T00:00:00,web,2\n")}, []string{"line 2", "zone"}},
		{"unsorted", []string{"--trace", write("d.csv", "time,service,replicas\n2026-03-02T01:00:00Z,web,2\n2026-03-02T00:00:00Z,web,2\n")}, []string{"line 3"}},
		{"policy key", []string{"--trace", good, "--policy", write("p.yaml", "savings-flor: 0.2\n")}, []string{"p.yaml", "line 1", "savings-flor", "savings-floor"}},
		{"policy value", []string{"--trace", good, "--policy", write("q.yaml", "capacity-type: cheap\n")}, []string{"q.yaml", "capacity-type", "cheap"}},
		{"world", []string{"--trace", good, "--world", write("w.yaml", "bootToJoin: {min: 2m, max: 1m}\n")}, []string{"w.yaml", "bootToJoin"}},
		{"two policies of one name", []string{"--trace", good, "--policy", write("x.yaml", "name: same\n"), "--policy", write("y.yaml", "name: same\n")}, []string{"same"}},
	} {
		out, errOut, code := simulate(t, append(c.args, "--plot", filepath.Join(dir, c.name+".svg"))...)
		if code == 0 {
			t.Errorf("%s: accepted: %s", c.name, out)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("%s: the error does not name %q: %s", c.name, w, errOut)
			}
		}
		if _, err := os.Stat(filepath.Join(dir, c.name+".svg")); err == nil {
			t.Errorf("%s: a plot was written", c.name)
		}
	}
}

// The public traces' tables run through their adapters, each service
// named by --map; without the mapping, or Alibaba's memory scale, they
// are refused.
func TestSimulatePublicTraces(t *testing.T) {
	fixtures := "../../../sim/trace/testdata/"
	for _, c := range []struct {
		format, file string
		args         []string
		refused      []string
	}{
		{"azure-vmtable", "azure-vmtable.csv", []string{"--map", "*=api"}, []string{"--map"}},
		{"alibaba-containers", "alibaba-container-meta.csv", []string{"--map", "app_1=web", "--map", "*=jobs", "--memory-full", "16Gi"}, []string{"--map", "--memory-full"}},
	} {
		base := []string{"--trace", fixtures + c.file, "--trace-format", c.format, "-o", "json"}
		out, errOut, code := simulate(t, append(base, c.args...)...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", c.format, code, errOut)
		}
		var got struct{ Results []sim.Result }
		if err := json.Unmarshal([]byte(out), &got); err != nil || len(got.Results) != 1 || got.Results[0].Cost <= 0 || got.Results[0].Pending.Count == 0 {
			t.Fatalf("%s: %v %s", c.format, err, out)
		}
		_, errOut, code = simulate(t, base...)
		if code == 0 || !strings.Contains(errOut, c.refused[0]) {
			t.Errorf("%s without --map: exit %d, %s", c.format, code, errOut)
		}
		if len(c.refused) > 1 {
			_, errOut, code = simulate(t, append(base, "--map", "*=jobs")...)
			if code == 0 || !strings.Contains(errOut, c.refused[1]) {
				t.Errorf("%s without %s: exit %d, %s", c.format, c.refused[1], code, errOut)
			}
		}
	}
}

// The simulator's controllers tick as the real ones do: a cloud's at the
// server's default --reconcile-interval, the local provider's at gantry
// dev's.
func TestSimulatedControllersTickAsTheRealOnes(t *testing.T) {
	if got, want := sim.DefaultWorld().ReconcileInterval, server.DefaultConfig(t.TempDir()).Controller.Interval; got != want {
		t.Errorf("the default world ticks every %s, the server every %s", got, want)
	}
	if got, want := sim.LocalWorld().ReconcileInterval, devConfig(t.TempDir()).Controller.Interval; got != want {
		t.Errorf("the local world ticks every %s, gantry dev every %s", got, want)
	}
}
