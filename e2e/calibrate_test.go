package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/client"
	"github.com/gantry-dev/gantry/internal/browser"
	"github.com/gantry-dev/gantry/sim"
)

// calibrationSpec: one group of local machines (3 replicas fit one), no
// spread, so that the machines follow the demand alone.
const calibrationSpec = `kind: Cluster
metadata: {name: cal}
spec:
  provider: {name: local}
  capacityGroups:
    - {groupId: general, instanceType: local.medium, minSize: 0, maxSize: 8}
  systemReserved: {cpu: 100m, memory: 128Mi}
---
kind: Service
metadata: {name: load}
spec:
  cluster: cal
  command: [gantry, hello]
  ports: [{name: http}]
  replicas: %d
  resources: {cpu: 500m, memory: 256Mi}
`

// calibrationSteps is the demand: an hour's shape compressed into two
// and a half minutes (a step about every 40 s; the time settings below
// compressed alike): up, down to a third, up again.
var calibrationSteps = []struct {
	after    time.Duration
	replicas int
}{{0, 6}, {30 * time.Second, 15}, {70 * time.Second, 6}, {110 * time.Second, 9}, {150 * time.Second, 9}}

// calibrationSettings are the decision settings both runs use: gantry
// dev's own, with the empty-machine TTL and minimum lifetime compressed as
// the demand is.
var calibrationSettings = map[string]string{
	"heartbeat-interval": "1s", "launch-backoff": "2s", "join-timeout": "1m", "reschedule-grace": "3s",
	"empty-machine-ttl": "10s", "min-lifetime": "20s",
}

// TestSimulationCalibration runs the same demand through `gantry dev`
// (real agent processes on the local provider, in real time) and through
// `gantry simulate` with the latencies the real run measured, and holds
// the simulator to the real run: cost within 5%, machines launched and
// terminated and replicas moved live within 5% (for counts this small:
// the same). The figures
// are logged and kept as the artifact calibration.txt, for
// docs/simulate.md.
func TestSimulationCalibration(t *testing.T) {
	// Beside another test: what the simulator is given is what this run
	// measured, latencies included, so a busy neighbour moves both alike
	// (it held within 1.0% beside the planner's tests on 2 cores).
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "state")
	specFile := writeFile(t, t.TempDir(), "cal.yaml", fmt.Sprintf(calibrationSpec, calibrationSteps[0].replicas))
	dashboard := dashboardOf(t, runDevArgs(t, "", dir, "-f", specFile,
		"--empty-machine-ttl", calibrationSettings["empty-machine-ttl"], "--min-lifetime", calibrationSettings["min-lifetime"]))
	admin, err := os.ReadFile(filepath.Join(dir, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	devAPI := client.New(strings.TrimSuffix(dashboard, "/ui/"), strings.TrimSpace(string(admin)), nil)
	ctx := context.Background()

	began := time.Now()
	issued := []time.Time{began}
	for _, step := range calibrationSteps[1:] {
		// The demand's own schedule, in real time: what is calibrated is
		// how the real loop and machines behave over time (no condition
		// to wait for); the simulation is given the times each step
		// actually took effect.
		time.Sleep(time.Until(began.Add(step.after)))
		if _, stderr, code := runGantry(t, "--data-dir", dir, "scale", "service", "load", "--replicas", fmt.Sprint(step.replicas)); code != 0 {
			t.Fatalf("scale to %d: %s", step.replicas, stderr)
		}
		issued = append(issued, time.Now())
	}
	end := issued[len(issued)-1]
	real := measureRealRun(t, ctx, devAPI, end)
	start := real.start // the first machine's intent: the real run's trace begins here
	t.Logf("real run: %s", real)

	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var trace strings.Builder
	trace.WriteString("time,service,replicas\n")
	for i, step := range calibrationSteps {
		at := base.Add(issued[i].Sub(start).Round(time.Second))
		if i == 0 {
			at = base
		}
		fmt.Fprintf(&trace, "%s,load,%d\n", at.Format(time.RFC3339), step.replicas)
	}
	var policy strings.Builder
	policy.WriteString("name: dev\n")
	for _, k := range slices.Sorted(maps.Keys(calibrationSettings)) {
		fmt.Fprintf(&policy, "%s: %s\n", k, calibrationSettings[k])
	}
	tmp := t.TempDir()
	out, stderr, code := runGantry(t, "simulate", "-f", specFile, "-o", "json",
		"--trace", writeFile(t, tmp, "trace.csv", trace.String()),
		"--policy", writeFile(t, tmp, "dev.yaml", policy.String()),
		"--world", writeFile(t, tmp, "world.yaml", real.world()))
	if code != 0 {
		t.Fatalf("simulate: %s", stderr)
	}
	var answer struct{ Results []sim.Result }
	if err := json.Unmarshal([]byte(out), &answer); err != nil || len(answer.Results) != 1 {
		t.Fatalf("simulate's JSON: %v\n%s", err, out)
	}
	got := answer.Results[0]
	terminated := 0
	for _, n := range got.Disruptions.Terminations {
		terminated += n
	}
	counts := []struct {
		what      string
		real, sim int
	}{
		{"machines launched", real.launched, got.Disruptions.Launches},
		{"machines terminated", real.terminated, terminated},
		{"replicas moved live", real.moved, got.Disruptions.ReplicasMoved},
	}
	figure := fmt.Sprintf("%-22s %10s %10s %8s\n%-22s %10.5f %10.5f %7.1f%%\n", "", "gantry dev", "simulate", "diff",
		"cost ($)", real.cost, got.Cost, 100*relDiff(got.Cost, real.cost))
	for _, c := range counts {
		figure += fmt.Sprintf("%-22s %10d %10d %7.1f%%\n", c.what, c.real, c.sim, 100*relDiff(float64(c.sim), float64(c.real)))
	}
	t.Logf("calibration over %s of demand, world %s\n%s", end.Sub(start).Round(time.Second), strings.ReplaceAll(real.world(), "\n", "; "), figure)
	browser.Keep(t, "calibration.txt", []byte(figure+"\nworld:\n"+real.world()+"\ntrace:\n"+trace.String()))
	if relDiff(got.Cost, real.cost) > 0.05 {
		t.Errorf("the simulated cost %.5f is not within 5%% of the real run's %.5f", got.Cost, real.cost)
	}
	for _, c := range counts {
		if relDiff(float64(c.sim), float64(c.real)) > 0.05 {
			t.Errorf("%s: the simulation %d, the real run %d (terminations %v)", c.what, c.sim, c.real, got.Disruptions.Terminations)
		}
	}
}

func relDiff(got, want float64) float64 {
	if want == 0 {
		return math.Abs(got)
	}
	return math.Abs(got-want) / want
}

// realRun is what the machines of the real run cost and did, and the
// latencies they showed.
type realRun struct {
	start                   time.Time
	cost                    float64
	launched, terminated    int
	moved                   int
	launch, boot, terminate span
}

type span struct{ min, max time.Duration }

func (s *span) note(d time.Duration) {
	if s.max == 0 || d < s.min {
		s.min = d
	}
	s.max = max(s.max, d)
}

func (s span) yaml() string {
	return fmt.Sprintf("{min: %s, max: %s}", s.min.Round(time.Millisecond), max(s.max, s.min).Round(time.Millisecond))
}

// world is the simulator's world of the measured latencies.
func (r realRun) world() string {
	return fmt.Sprintf("launchLatency: %s\nbootToJoin: %s\nterminateLatency: %s\nreplicaStart: {min: 500ms, max: 2s}\ninsufficientCapacity: {onDemand: 0, spot: 0}\n",
		r.launch.yaml(), r.boot.yaml(), r.terminate.yaml())
}

func (r realRun) String() string {
	return fmt.Sprintf("cost $%.5f, %d launched, %d terminated, %d replicas moved; launch %s, boot %s, terminate %s", r.cost, r.launched, r.terminated, r.moved,
		r.launch.yaml(), r.boot.yaml(), r.terminate.yaml())
}

// measureRealRun bills every machine of the run, as the simulator does,
// from its launch's answer until it was terminated (or the end), and
// measures the latencies: intent to launch answer, answer to join,
// terminating to terminated.
func measureRealRun(t *testing.T, ctx context.Context, c *client.Client, end time.Time) realRun {
	t.Helper()
	machines, err := c.ListEveryMachine(ctx, "cal")
	if err != nil {
		t.Fatal(err)
	}
	events, err := c.ListEvents(ctx, client.EventQuery{Kind: "Machine", Limit: 10_000})
	if err != nil {
		t.Fatal(err)
	}
	moves, err := c.ListEvents(ctx, client.EventQuery{Kind: "Replica", Limit: 10_000})
	if err != nil {
		t.Fatal(err)
	}
	var r realRun
	for _, e := range moves {
		if e.Reason == "Scheduled" && strings.HasPrefix(e.Message, "moving from ") {
			r.moved++
		}
	}
	terminating := map[string]time.Time{}
	for _, e := range events {
		if e.Reason == "Terminating" {
			terminating[e.ObjectName] = e.Time
		}
	}
	for _, m := range machines {
		if r.start.IsZero() || m.CreatedAt.Before(r.start) {
			r.start = m.CreatedAt
		}
		if m.InstanceKnownAt == nil {
			continue
		}
		r.launched++
		r.launch.note(m.InstanceKnownAt.Sub(m.CreatedAt))
		if m.JoinedAt != nil {
			r.boot.note(m.JoinedAt.Sub(*m.InstanceKnownAt))
		}
		gone := end
		if m.FleetState == api.FleetTerminated && m.StateChangedAt.Before(end) {
			gone = m.StateChangedAt
			r.terminated++
			if at, ok := terminating[m.ID]; ok {
				r.terminate.note(gone.Sub(at))
			}
		}
		r.cost += m.PricePerHour * gone.Sub(*m.InstanceKnownAt).Hours()
	}
	if r.launched == 0 || r.boot.max == 0 {
		t.Fatalf("no machine of the real run launched and joined: %+v", machines)
	}
	if r.terminate.max == 0 {
		r.terminate = span{min: time.Second, max: time.Second}
	}
	return r
}
