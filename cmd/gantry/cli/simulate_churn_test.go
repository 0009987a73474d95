package cli

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/sim"
)

// churnBound is the most machines a day of the bundled trace launches
// under any policy of the grid: the healthy ones launch 19-43; the loops
// this test found launched 300-1,300 (a replacement by a machine's like
// under a floor of zero, a warm machine started and stopped every pass,
// a replacement launched again every TTL beside a running warm pool).
const churnBound = 100

// No policy makes the control loop undo what it did: a seeded draw of
// policies from a grid of the settings that shape consolidation, each
// run a day over the bundled trace, settles at every instant and
// launches no more than churnBound machines. GANTRY_CHURN_SEED replays
// another draw; a failure names the seed and the policy.
func TestNoPolicyChurnsForNothing(t *testing.T) {
	seed := uint64(1)
	if v := os.Getenv("GANTRY_CHURN_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("GANTRY_CHURN_SEED=%q: %v", v, err)
		}
		seed = n
	}
	rng := rand.New(rand.NewPCG(seed, seed))
	dir := t.TempDir()
	args := []string{"--trace", examplesDir + "simulate/demand.csv", "--until", "2026-03-03T00:00:00Z", "-o", "json"}
	drawn := map[string]string{}
	for i := range 8 {
		body := drawPolicy(rng, fmt.Sprintf("p%d", i))
		file := filepath.Join(dir, fmt.Sprintf("p%d.yaml", i))
		if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		drawn[fmt.Sprintf("p%d", i)] = body
		args = append(args, "--policy", file)
	}
	out, errOut, code := simulate(t, args...)
	if code != 0 {
		t.Fatalf("seed %d: exit %d: %s", seed, code, errOut)
	}
	var got struct{ Results []sim.Result }
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got.Results) != len(drawn) {
		t.Fatalf("seed %d: %v, %d results", seed, err, len(got.Results))
	}
	for _, res := range got.Results {
		if res.Passes.Unsettled != 0 || res.Disruptions.Launches > churnBound {
			t.Errorf("seed %d, policy %s:\n%s\nunsettled at %d instants, %d machines launched (at most %d), %d passes",
				seed, res.Policy, drawn[res.Policy], res.Passes.Unsettled, res.Disruptions.Launches, churnBound, res.Passes.Total)
		}
	}
}

// drawPolicy is a policy of the grid: capacity type, warm pool, and the
// settings that say when a machine may go.
func drawPolicy(rng *rand.Rand, name string) string {
	pick := func(from ...string) string { return from[rng.IntN(len(from))] }
	lines := []string{"name: " + name,
		"capacity-type: " + pick("any", "spot", "onDemand"),
		"savings-floor: " + pick(`"0"`, `"0.05"`, `"0.25"`),
		"min-lifetime: " + pick("0s", "1m", "30m"),
		"empty-machine-ttl: " + pick("30s", "1m", "5m"),
		"max-removals: " + pick("1", "3")}
	switch rng.IntN(3) {
	case 1:
		lines = append(lines, "warm-pool: "+pick("1", "2"), "warm-pool-state: stopped")
	case 2:
		lines = append(lines, "warm-pool: "+pick("1", "2"), "warm-pool-state: running")
	}
	return strings.Join(lines, "\n") + "\n"
}
