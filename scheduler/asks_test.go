package scheduler

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/gantry-dev/gantry/api"
)

// fleetThatMayTake draws machines of two clusters, some full, some with GPUs,
// a TEE runtime or labels, with residents; and pending replicas that ask
// nothing of the machines they do not go on (scheduler.Asks), with
// static needs, dedication, isolation and priorities.
func fleetThatMayTake(rng *rand.Rand) ([]*Machine, []Replica) {
	var ms []*Machine
	for i := range 2 + rng.IntN(30) {
		m := machine(fmt.Sprintf("m%02d", i), []string{"g1", "g2"}[rng.IntN(2)], 4000, 8)
		if rng.IntN(6) == 0 {
			m.Cluster = "other"
		}
		if rng.IntN(5) == 0 {
			withGPUs(m, "a100", 40, 1+rng.IntN(2))
		}
		if rng.IntN(4) == 0 {
			m.Runtimes = append(m.Runtimes, RuntimeDocker)
		}
		if rng.IntN(6) == 0 {
			m.Runtimes, m.TEE = append(m.Runtimes, "kata"), true
		}
		if rng.IntN(3) == 0 {
			m.Labels = map[string]string{"disk": "ssd"}
		}
		for k := range rng.IntN(8) {
			r := replica([]string{"db", "web", "batch"}[rng.IntN(3)], 100*i+k, int64(250*(1+rng.IntN(4))), int64(256*(1+rng.IntN(4))))
			if r.Requests.MilliCPU+m.Allocated.MilliCPU > m.Allocatable.MilliCPU {
				continue
			}
			Assign(m, r, nil)
			m.Residents = append(m.Residents, Resident{Replica: &r})
			m.PlainResidents++
		}
		ms = append(ms, m)
	}
	var pending []Replica
	for s := range 1 + rng.IntN(4) {
		rules := &Rules{Service: fmt.Sprintf("svc%d", s), Cluster: "c", Runtime: RuntimeProcess, Priority: rng.IntN(3), Isolation: api.IsolationAny}
		switch rng.IntN(8) {
		case 0:
			rules.NodeSelector = map[string]string{"disk": "ssd"}
		case 1:
			rules.Groups = []string{"g2"}
		case 2:
			rules.Dedicated = true
		case 3:
			rules.Isolation = api.IsolationTEERequired
		case 4:
			rules.Runtime = RuntimeDocker
		case 5:
			rules.GPU = &GPUNeed{Count: 1, Preferred: rng.IntN(2) == 0}
		}
		cpu, mem := int64(250*(1+rng.IntN(8))), int64(256*(1+rng.IntN(8)))
		for i := range 1 + rng.IntN(12) {
			pending = append(pending, Replica{ID: fmt.Sprintf("%s-%d", rules.Service, i), Index: i,
				Requests: api.Resources{MilliCPU: cpu, MemoryBytes: mem << 20}, Rules: rules})
		}
	}
	return ms, pending
}

func clones(ms []*Machine) []*Machine {
	out := make([]*Machine, len(ms))
	for i, m := range ms {
		out[i] = m.Share()
	}
	return out
}

// A session of the machines that may take one of the replicas (Asks)
// places them as a session of every machine does, and leaves the same
// ones unplaced: the sessions that leave the others out (the planner's,
// and a pass's scheduling, which explains only when asked) stand on it.
func TestASessionOfTheMachinesThatMayTakeOnePlacesAsEveryMachine(t *testing.T) {
	for seed := range uint64(500) {
		rng := rand.New(rand.NewPCG(seed, 33))
		ms, pending := fleetThatMayTake(rng)
		asks := NewAsks()
		for i := range pending {
			if !asks.Add(&pending[i]) {
				t.Fatalf("seed %d: replica %s asks something of other machines", seed, pending[i].ID)
			}
		}
		var receivers []*Machine
		for _, m := range ms {
			if asks.MayTake(m) {
				receivers = append(receivers, m)
			}
		}
		every := Schedule(clones(ms), pending)
		some := NewSession(clones(receivers)).Fill(pending)
		if !reflect.DeepEqual(every.Placements, some.Placements) {
			t.Fatalf("seed %d (%d of %d machines may take one): placed\n%+v\nnot as every machine does\n%+v", seed, len(receivers), len(ms), some.Placements, every.Placements)
		}
		if a, b := slices.Sorted(maps.Keys(every.Unplaced)), slices.Sorted(maps.Keys(some.Unplaced)); !slices.Equal(a, b) {
			t.Fatalf("seed %d: left %v unplaced, every machine %v", seed, b, a)
		}
	}
}
