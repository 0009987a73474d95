package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
)

const crashSpec = `kind: Cluster
metadata: {name: crash}
spec:
  agent: {version: "VERSION"}
  containerCidr: 10.9.0.0/20
  capacityGroups:
    - {groupId: g, instanceType: local.small, minSize: 1, maxSize: 6}
---
kind: Service
metadata: {name: web}
spec:
  cluster: crash
  command: [gantry, hello]
  ports: [{name: http}]
  replicas: REPLICAS
  resources: {cpu: 600m, memory: 128Mi}
`

// Kill -9 the server at seeded random points while the fleet scales up and
// down and rolls out template changes, restart it each time, and check after convergence: no instance
// leaked, none launched twice for one intent, every replica running, no /24
// held twice. GANTRY_CRASH_SEED replays a run.
func TestServerKilledAtRandomPointsLosesNothing(t *testing.T) {
	t.Parallel() // see parallelTests in helpers_test.go
	seed := rand.Uint64()
	if s, err := strconv.ParseUint(os.Getenv("GANTRY_CRASH_SEED"), 10, 64); err == nil {
		seed = s
	}
	t.Logf("seed %d (replay with GANTRY_CRASH_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 11))
	dir := t.TempDir()
	args := []string{"--empty-machine-ttl", "500ms", "--min-lifetime", "0s", "--max-removals", "3", "--orphan-grace", "1s"}
	s := startServer(t, dir, args...)
	addr := hostPort(s.url)
	args = append(args, "--listen", addr)
	version := "v0"
	apply := func(replicas int) {
		spec := writeFile(t, dir, "crash.yaml", strings.NewReplacer("REPLICAS", strconv.Itoa(replicas), "VERSION", version).Replace(crashSpec))
		if _, errOut, code := s.gantry("apply", "-f", spec); code != 0 {
			t.Fatalf("apply %d replicas: %s", replicas, errOut)
		}
	}
	for point := 1; point <= 30; point++ {
		replicas := []int{1, 5, 2, 6, 0, 4}[rng.IntN(6)]
		if rng.IntN(3) == 0 {
			version = fmt.Sprintf("v%d", point) // a rollout under way at the kill
		}
		apply(replicas)
		wait := time.Duration(rng.IntN(800)) * time.Millisecond
		time.Sleep(wait)
		t.Logf("point %d: %d replicas, template %s, kill -9 after %s", point, replicas, version, wait)
		_ = s.cmd.Process.Signal(syscall.SIGKILL)
		_ = s.cmd.Wait()
		s = startServer(t, dir, args...)
	}
	const final = 5 // 600m each on 1-CPU machines: 5 machines
	version = "final"
	apply(final)
	waitFor(t, "convergence", func() (bool, string) {
		if ok, why := allAnswer(s.replicas("web"), final); !ok {
			return false, why
		}
		c, err := s.api.GetCluster(context.Background(), "crash")
		if err != nil {
			return false, err.Error()
		}
		if g := c.Status.Groups[0]; g.Updated != g.Current {
			return false, fmt.Sprintf("rollout: %d/%d machines updated", g.Updated, g.Current)
		}
		return fleetConsistent(s.machines(), dir)
	})
	if ok, why := fleetConsistent(s.machines(), dir); !ok {
		t.Fatal(why)
	}
}

// fleetConsistent checks the invariants between the store and what runs.
func fleetConsistent(machines []api.Machine, dir string) (bool, string) {
	live := map[string]api.Machine{}
	subnets := map[string]string{}
	for _, m := range machines {
		if m.FleetState == api.FleetTerminating {
			return false, "machine " + m.ID + " still terminating"
		}
		live[m.ProviderID] = m
		if other, dup := subnets[m.Subnet]; dup && m.Subnet != "" {
			return false, fmt.Sprintf("subnet %s held by %s and %s", m.Subnet, other, m.ID)
		}
		subnets[m.Subnet] = m.ID
	}
	perKey := map[string]int{}
	running := 0
	for _, inst := range localInstances(dir) {
		perKey[inst.Tags["gantry.dev/launch-key"]]++
		if perKey[inst.Tags["gantry.dev/launch-key"]] > 1 {
			return false, "two instances for launch key " + inst.Tags["gantry.dev/launch-key"]
		}
		alive := inst.PID > 0 && processAlive(inst.PID, inst.ID)
		if alive {
			running++
		}
		if _, known := live[inst.ID]; alive && !known {
			return false, "leaked instance " + inst.ID + " (no live machine)"
		}
	}
	for id, m := range live {
		if m.JoinState == api.JoinJoined && !instanceAlive(dir, id) {
			return false, "machine " + m.ID + " has no running instance"
		}
	}
	if running != len(live) {
		return false, fmt.Sprintf("%d agent processes for %d live machines", running, len(live))
	}
	return true, ""
}

func instanceAlive(dir, id string) bool {
	for _, inst := range localInstances(dir) {
		if inst.ID == id {
			return inst.PID > 0 && processAlive(inst.PID, inst.ID)
		}
	}
	return false
}
