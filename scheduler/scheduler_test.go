package scheduler

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/api"
)

func machine(id, group string, milliCPU int64, memGi int64) *Machine {
	return &Machine{ID: id, Cluster: "c", Group: group, Runtimes: []string{RuntimeProcess},
		Allocatable: api.Resources{MilliCPU: milliCPU, MemoryBytes: memGi << 30, EphemeralBytes: 10 << 30}}
}

func replica(svc string, i int, milliCPU int64, memMi int64) Replica {
	return Replica{ID: fmt.Sprintf("%s-%d", svc, i), Service: svc, Cluster: "c", Index: i, Runtime: RuntimeProcess,
		Requests: api.Resources{MilliCPU: milliCPU, MemoryBytes: memMi << 20}}
}

func TestPacksOntoFullestMachine(t *testing.T) {
	a, b := machine("a", "g", 4000, 8), machine("b", "g", 4000, 8)
	b.Allocated = api.Resources{MilliCPU: 2000, MemoryBytes: 4 << 30}
	res := Schedule([]*Machine{a, b}, []Replica{replica("web", 0, 1000, 512)})
	if len(res.Placements) != 1 || res.Placements[0].MachineID != "b" {
		t.Fatalf("want packing onto b, got %+v", res)
	}
}

func TestUnplacedReasonCountsMachines(t *testing.T) {
	a := machine("a", "g", 1000, 8)
	b := machine("b", "g", 4000, 8)
	b.Runtimes = []string{RuntimeDocker}
	res := Schedule([]*Machine{a, b}, []Replica{replica("web", 0, 2000, 512)})
	got := res.Unplaced["web-0"]
	if got != "0/2 machines fit: 1 insufficient cpu, 1 no process runtime" {
		t.Fatalf("reason: %q", got)
	}
	if r := Schedule(nil, []Replica{replica("web", 0, 1, 1)}).Unplaced["web-0"]; r != "no joined machine in the cluster" {
		t.Fatalf("empty cluster reason: %q", r)
	}
}

func TestConstraints(t *testing.T) {
	gpu := machine("gpu-1", "gpu", 8000, 32)
	gpu.Labels = map[string]string{"disk": "ssd"}
	gen := machine("gen-1", "general", 8000, 32)
	cases := []struct {
		name string
		edit func(r *Replica)
		want string // machine id, or "" for unplaced
	}{
		{"group pinning", func(r *Replica) { r.Groups = []string{"gpu"} }, "gpu-1"},
		{"node selector", func(r *Replica) { r.NodeSelector = map[string]string{"disk": "ssd"} }, "gpu-1"},
		{"selector nobody matches", func(r *Replica) { r.NodeSelector = map[string]string{"disk": "nvme"} }, ""},
		{"runtime nobody has", func(r *Replica) { r.Runtime = RuntimeDocker }, ""},
		{"other cluster", func(r *Replica) { r.Cluster = "other" }, ""},
		{"gpus nobody has", func(r *Replica) { r.Requests.GPUs = 1 }, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := replica("web", 0, 100, 100)
			tc.edit(&r)
			ms := []*Machine{clone(gpu), clone(gen)}
			res := Schedule(ms, []Replica{r})
			got := ""
			if len(res.Placements) == 1 {
				got = res.Placements[0].MachineID
			}
			if tc.want == "" && got != "" {
				t.Fatalf("placed on %s, want unplaced", got)
			}
			if tc.want != "" && got != tc.want {
				t.Fatalf("placed on %q, want %s (reason %q)", got, tc.want, res.Unplaced[r.ID])
			}
		})
	}
}

func TestDedicatedOnePerMachine(t *testing.T) {
	ms := []*Machine{machine("a", "g", 8000, 8), machine("b", "g", 8000, 8)}
	var rs []Replica
	for i := 0; i < 3; i++ {
		r := replica("db", i, 100, 100)
		r.Dedicated = true
		rs = append(rs, r)
	}
	res := Schedule(ms, rs)
	if len(res.Placements) != 2 || res.Placements[0].MachineID == res.Placements[1].MachineID {
		t.Fatalf("dedicated placements: %+v", res.Placements)
	}
	if !strings.Contains(res.Unplaced["db-2"], "dedicated") {
		t.Fatalf("third replica reason: %q", res.Unplaced["db-2"])
	}
}

func TestPriorityPlacedFirst(t *testing.T) {
	ms := []*Machine{machine("a", "g", 1000, 8)}
	low, high := replica("batch", 0, 1000, 100), replica("api", 0, 1000, 100)
	high.Priority = 10
	res := Schedule(ms, []Replica{low, high})
	if len(res.Placements) != 1 || res.Placements[0].ReplicaID != "api-0" {
		t.Fatalf("high priority not first: %+v", res)
	}
}

func clone(m *Machine) *Machine {
	c := *m
	return &c
}

// Property: for random machines and replicas, no machine is ever allocated
// beyond its allocatable, every placement satisfies Fits at the time, and
// the result does not depend on input order.
func TestRandomNeverOvercommitsAndIsDeterministic(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	for round := 0; round < 200; round++ {
		var ms []*Machine
		for i := 0; i < 1+rng.IntN(8); i++ {
			m := machine(fmt.Sprintf("m%02d", i), []string{"a", "b"}[rng.IntN(2)], int64(500+rng.IntN(8000)), int64(1+rng.IntN(16)))
			m.Allocatable.GPUs = rng.IntN(3)
			ms = append(ms, m)
		}
		var rs []Replica
		for i := 0; i < rng.IntN(40); i++ {
			r := replica(fmt.Sprintf("s%d", rng.IntN(4)), i, int64(50+rng.IntN(3000)), int64(50+rng.IntN(4096)))
			r.Requests.GPUs = rng.IntN(2)
			r.Dedicated = rng.IntN(5) == 0
			if rng.IntN(4) == 0 {
				r.Groups = []string{"a"}
			}
			rs = append(rs, r)
		}
		first := run(ms, rs)
		shuffled := append([]Replica(nil), rs...)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		msShuffled := append([]*Machine(nil), ms...)
		rng.Shuffle(len(msShuffled), func(i, j int) { msShuffled[i], msShuffled[j] = msShuffled[j], msShuffled[i] })
		second := run(msShuffled, shuffled)
		if !reflect.DeepEqual(first, second) {
			t.Fatalf("round %d: not deterministic:\n%+v\n%+v", round, first, second)
		}
		checkNoOvercommit(t, ms, rs, first)
	}
}

func run(ms []*Machine, rs []Replica) Result {
	copies := make([]*Machine, len(ms))
	for i, m := range ms {
		copies[i] = clone(m)
	}
	return Schedule(copies, append([]Replica(nil), rs...))
}

func checkNoOvercommit(t *testing.T, ms []*Machine, rs []Replica, res Result) {
	t.Helper()
	byID := map[string]Replica{}
	for _, r := range rs {
		byID[r.ID] = r
	}
	used := map[string]api.Resources{}
	perService := map[string]map[string]int{}
	for _, p := range res.Placements {
		used[p.MachineID] = used[p.MachineID].Add(byID[p.ReplicaID].Requests)
		if perService[p.MachineID] == nil {
			perService[p.MachineID] = map[string]int{}
		}
		r := byID[p.ReplicaID]
		perService[p.MachineID][r.Service]++
		if r.Dedicated && perService[p.MachineID][r.Service] > 1 {
			t.Fatalf("dedicated replica %s shares machine %s", r.ID, p.MachineID)
		}
	}
	for _, m := range ms {
		if !m.Allocatable.Fits(used[m.ID]) {
			t.Fatalf("machine %s overcommitted: %+v > %+v", m.ID, used[m.ID], m.Allocatable)
		}
	}
	if len(res.Placements)+len(res.Unplaced) != len(rs) {
		t.Fatalf("replicas lost: %d placed + %d unplaced != %d", len(res.Placements), len(res.Unplaced), len(rs))
	}
}

func TestMachineSpread(t *testing.T) {
	ms := []*Machine{machine("a", "g", 8000, 8), machine("b", "g", 8000, 8), machine("c", "g", 8000, 8)}
	var rs []Replica
	for i := 0; i < 7; i++ {
		r := replica("web", i, 100, 100)
		r.Spread = []api.SpreadRule{{Key: api.SpreadMachine, MaxSkew: 1}}
		rs = append(rs, r)
	}
	res := Schedule(ms, rs)
	count := map[string]int{}
	for _, p := range res.Placements {
		count[p.MachineID]++
	}
	if len(res.Placements) != 7 || count["a"] != 3 || count["b"] != 2 || count["c"] != 2 {
		t.Fatalf("want 3/2/2 over a/b/c, got %v (unplaced %v)", count, res.Unplaced)
	}
}

func TestZoneSpreadBlocksSkew(t *testing.T) {
	a, b := machine("a", "g", 8000, 8), machine("b", "g", 300, 8)
	a.Zone, b.Zone = "z1", "z2"
	var rs []Replica
	for i := 0; i < 4; i++ {
		r := replica("web", i, 200, 100)
		r.Spread = []api.SpreadRule{{Key: api.SpreadZone, MaxSkew: 1}}
		rs = append(rs, r)
	}
	res := Schedule([]*Machine{a, b}, rs)
	// z2 holds only one replica, so z1 may hold at most two.
	if len(res.Placements) != 3 || len(res.Unplaced) != 1 {
		t.Fatalf("placements %v unplaced %v", res.Placements, res.Unplaced)
	}
	for _, why := range res.Unplaced {
		if !strings.Contains(why, "zone spread maxSkew 1") {
			t.Fatalf("reason %q", why)
		}
	}
}
