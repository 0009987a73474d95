package scheduler

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/api"
)

func machine(id, group string, milliCPU int64, memGi int64) *Machine {
	return &Machine{ID: id, Cluster: "c", Group: group, Zone: "z1", Runtimes: []string{RuntimeProcess},
		Allocatable: api.Resources{MilliCPU: milliCPU, MemoryBytes: memGi << 30, EphemeralBytes: 10 << 30}}
}

func withGPUs(m *Machine, typ string, vram float64, n int) *Machine {
	for i := 0; i < n; i++ {
		m.GPUs = append(m.GPUs, GPU{Index: i, Type: typ, VRAMGB: vram})
	}
	m.Allocatable.GPUs = n
	return m
}

func replica(svc string, i int, milliCPU int64, memMi int64) Replica {
	return Replica{ID: fmt.Sprintf("%s-%d", svc, i), Index: i, Requests: api.Resources{MilliCPU: milliCPU, MemoryBytes: memMi << 20},
		Rules: &Rules{Service: svc, Cluster: "c", Runtime: RuntimeProcess}}
}

func placedOn(res Result, id string) string {
	for _, p := range res.Placements {
		if p.ReplicaID == id {
			return p.MachineID
		}
	}
	return ""
}

func TestPacksOntoFullestMachine(t *testing.T) {
	a, b := machine("a", "g", 4000, 8), machine("b", "g", 4000, 8)
	b.Allocated = api.Resources{MilliCPU: 2000, MemoryBytes: 4 << 30}
	res := Schedule([]*Machine{a, b}, []Replica{replica("web", 0, 1000, 512)})
	if placedOn(res, "web-0") != "b" {
		t.Fatalf("want packing onto b, got %+v", res)
	}
}

func TestSpreadScoringPrefersEmptiestMachine(t *testing.T) {
	a, b := machine("a", "g", 4000, 8), machine("b", "g", 4000, 8)
	b.Allocated = api.Resources{MilliCPU: 2000, MemoryBytes: 4 << 30}
	r := replica("web", 0, 1000, 512)
	r.Scoring = api.ScoringSpread
	if got := placedOn(Schedule([]*Machine{a, b}, []Replica{r}), "web-0"); got != "a" {
		t.Fatalf("spread scoring placed on %q, want a", got)
	}
}

func TestUnplacedReasonCountsMachines(t *testing.T) {
	a := machine("a", "g", 1000, 8)
	b := machine("b", "g", 4000, 8)
	b.Runtimes = []string{RuntimeDocker}
	res := Schedule([]*Machine{a, b}, []Replica{replica("web", 0, 2000, 512)})
	if got := res.Unplaced["web-0"]; got != "0/2 machines fit: 1 insufficient cpu, 1 no process runtime" {
		t.Fatalf("reason: %q", got)
	}
	if r := Schedule(nil, []Replica{replica("web", 0, 1, 1)}).Unplaced["web-0"]; r != NoMachineReason {
		t.Fatalf("empty cluster reason: %q", r)
	}
}

func TestConstraints(t *testing.T) {
	cases := []struct {
		name string
		edit func(r *Replica)
		want string // machine id, or "" for unplaced
		why  string // part of the reason or note
	}{
		{"group pinning", func(r *Replica) { r.Groups = []string{"gpu"} }, "gpu-1", ""},
		{"node selector", func(r *Replica) { r.NodeSelector = map[string]string{"disk": "ssd"} }, "gpu-1", ""},
		{"selector nobody matches", func(r *Replica) { r.NodeSelector = map[string]string{"disk": "nvme"} }, "", "labels do not match"},
		{"runtime nobody has", func(r *Replica) { r.Runtime = RuntimeDocker }, "", "no docker runtime"},
		{"other cluster", func(r *Replica) { r.Cluster = "other" }, "", "no machine of the cluster takes replicas"},
		{"gpu required", func(r *Replica) { r.GPU = &GPUNeed{Count: 2} }, "gpu-1", ""},
		{"gpu required type", func(r *Replica) { r.GPU = &GPUNeed{Count: 1, Type: "nvidia-a100"} }, "gpu-1", ""},
		{"gpu required wrong type", func(r *Replica) { r.GPU = &GPUNeed{Count: 1, Type: "nvidia-h100"} }, "", "fewer than 1 nvidia-h100 gpu"},
		{"gpu required too little vram", func(r *Replica) { r.GPU = &GPUNeed{Count: 1, MinVRAMGB: 100} }, "", "with 100GB VRAM"},
		{"gpu required too many", func(r *Replica) { r.GPU = &GPUNeed{Count: 3} }, "", "fewer than 3 gpu"},
		{"gpu preferred takes gpus", func(r *Replica) { r.GPU = &GPUNeed{Count: 1, Preferred: true} }, "gpu-1", ""},
		{"gpu preferred falls back", func(r *Replica) { r.GPU = &GPUNeed{Count: 1, Type: "nvidia-h100", Preferred: true} }, "gen-1", "running without GPUs"},
		{"tee required", func(r *Replica) { r.Isolation = api.IsolationTEERequired }, "gen-1", ""},
		{"tee preferred", func(r *Replica) { r.Isolation = api.IsolationTEEPreferred }, "gen-1", ""},
		{"standard required runs anywhere", func(r *Replica) { r.Isolation = api.IsolationStandardRequired }, "gpu-1", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			gpu := withGPUs(machine("gpu-1", "gpu", 8000, 32), "nvidia-a100", 80, 2)
			gpu.Labels = map[string]string{"disk": "ssd"}
			gpu.Allocated = api.Resources{MilliCPU: 1000} // fuller: binpack picks it first
			gen := machine("gen-1", "general", 8000, 32)
			gen.TEE = true
			r := replica("web", 0, 100, 100)
			tc.edit(&r)
			res := Schedule([]*Machine{gpu, gen}, []Replica{r})
			got := placedOn(res, r.ID)
			if got != tc.want {
				t.Fatalf("placed on %q, want %q (reason %q)", got, tc.want, res.Unplaced[r.ID])
			}
			text := res.Unplaced[r.ID]
			if len(res.Placements) == 1 {
				text = res.Placements[0].Note
			}
			if !strings.Contains(text, tc.why) {
				t.Fatalf("reason/note %q does not mention %q", text, tc.why)
			}
		})
	}
}

func TestGPUDevicesAreGivenExactlyOnce(t *testing.T) {
	m := withGPUs(machine("g", "gpu", 64000, 256), "nvidia-l4", 24, 4)
	var rs []Replica
	for i := 0; i < 3; i++ {
		r := replica("infer", i, 100, 100)
		r.GPU = &GPUNeed{Count: 2}
		rs = append(rs, r)
	}
	res := Schedule([]*Machine{m}, rs)
	if len(res.Placements) != 2 || len(res.Unplaced) != 1 {
		t.Fatalf("4 GPUs hold two 2-GPU replicas: %+v", res)
	}
	got := append(append([]int{}, res.Placements[0].GPUs...), res.Placements[1].GPUs...)
	if !reflect.DeepEqual(got, []int{0, 1, 2, 3}) {
		t.Fatalf("devices %v", got)
	}
	if !strings.Contains(res.Unplaced["infer-2"], "insufficient free gpus") {
		t.Fatalf("reason %q", res.Unplaced["infer-2"])
	}
}

func TestTEERequiredFailsClosed(t *testing.T) {
	r := replica("vault", 0, 100, 100)
	r.Isolation = api.IsolationTEERequired
	res := Schedule([]*Machine{machine("a", "g", 8000, 8)}, []Replica{r})
	if got := res.Unplaced["vault-0"]; got != "no TEE runtime in cluster c (isolation teeRequired: prerequisite missing)" {
		t.Fatalf("reason %q", got)
	}
	tee := machine("t", "g", 8000, 8)
	tee.TEE = true
	res = Schedule([]*Machine{machine("a", "g", 8000, 8), tee}, []Replica{r})
	if len(res.Placements) != 1 || !res.Placements[0].TEE || res.Placements[0].MachineID != "t" {
		t.Fatalf("want the TEE machine with the TEE runtime: %+v", res)
	}
}

func TestTEEPreferredFallsBackWithNote(t *testing.T) {
	tee := machine("t", "g", 200, 8)
	tee.TEE = true
	plain := machine("p", "g", 8000, 8)
	var rs []Replica
	for i := 0; i < 2; i++ {
		r := replica("app", i, 200, 100)
		r.Isolation = api.IsolationTEEPreferred
		rs = append(rs, r)
	}
	res := Schedule([]*Machine{tee, plain}, rs)
	if len(res.Placements) != 2 || !res.Placements[0].TEE || res.Placements[1].TEE || !strings.Contains(res.Placements[1].Note, "teePreferred") {
		t.Fatalf("placements %+v", res.Placements)
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

func TestMachineSpreadCountsFullMachines(t *testing.T) {
	full := machine("full", "g", 100, 8)
	roomy := machine("roomy", "g", 8000, 8)
	var rs []Replica
	for i := 0; i < 3; i++ {
		r := replica("web", i, 200, 100)
		r.Spread = []api.SpreadRule{{Key: api.SpreadMachine, MaxSkew: 1}}
		rs = append(rs, r)
	}
	res := Schedule([]*Machine{full, roomy}, rs)
	// "full" takes none, so "roomy" may take only one (skew 1).
	if len(res.Placements) != 1 || !strings.Contains(res.Unplaced["web-1"], "machine spread maxSkew 1") {
		t.Fatalf("placements %v unplaced %v", res.Placements, res.Unplaced)
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

func TestSameZoneKeepsTheServiceTogether(t *testing.T) {
	a, b, c := machine("a", "g", 1000, 8), machine("b", "g", 8000, 8), machine("c", "g", 8000, 8)
	a.Zone, b.Zone, c.Zone = "z1", "z2", "z1"
	a.ServiceCount = map[string]int{"db": 1} // the service already runs in z1
	var rs []Replica
	for i := 1; i < 4; i++ {
		r := replica("db", i, 1000, 100)
		r.SameZone = true
		rs = append(rs, r)
	}
	res := Schedule([]*Machine{a, b, c}, rs)
	for _, p := range res.Placements {
		if p.MachineID == "b" {
			t.Fatalf("replica %s left zone z1", p.ReplicaID)
		}
	}
	if len(res.Placements) != 3 {
		t.Fatalf("placements %v unplaced %v", res.Placements, res.Unplaced)
	}
}

func clone(m *Machine) *Machine {
	c := *m
	c.GPUs = append([]GPU(nil), m.GPUs...)
	c.ServiceCount = map[string]int{}
	for k, v := range m.ServiceCount {
		c.ServiceCount[k] = v
	}
	return &c
}

// Property: for random machines and replicas, no machine is ever allocated
// beyond its allocatable or its GPUs, every hard constraint holds, and the
// result does not depend on input order.
func TestRandomNeverOvercommitsAndIsDeterministic(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	for round := 0; round < 300; round++ {
		ms := randomMachines(rng)
		rs := randomReplicas(rng)
		first := run(ms, rs)
		shuffled := append([]Replica(nil), rs...)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		msShuffled := append([]*Machine(nil), ms...)
		rng.Shuffle(len(msShuffled), func(i, j int) { msShuffled[i], msShuffled[j] = msShuffled[j], msShuffled[i] })
		if second := run(msShuffled, shuffled); !reflect.DeepEqual(first, second) {
			t.Fatalf("round %d: not deterministic:\n%+v\n%+v", round, first, second)
		}
		checkInvariants(t, ms, rs, first)
	}
}

func randomMachines(rng *rand.Rand) []*Machine {
	var ms []*Machine
	for i := 0; i < 1+rng.IntN(10); i++ {
		m := machine(fmt.Sprintf("m%02d", i), []string{"a", "b"}[rng.IntN(2)], int64(500+rng.IntN(8000)), int64(1+rng.IntN(16)))
		m.Zone = []string{"z1", "z2", "z3"}[rng.IntN(3)]
		m.TEE = rng.IntN(3) == 0
		if rng.IntN(3) == 0 {
			withGPUs(m, []string{"nvidia-a100", "nvidia-l4"}[rng.IntN(2)], float64(16+rng.IntN(64)), 1+rng.IntN(4))
		}
		ms = append(ms, m)
	}
	return ms
}

func randomReplicas(rng *rand.Rand) []Replica {
	var rs []Replica
	for s := 0; s < 1+rng.IntN(6); s++ {
		tmpl := replica(fmt.Sprintf("s%d", s), 0, int64(50+rng.IntN(3000)), int64(50+rng.IntN(4096)))
		tmpl.Dedicated = rng.IntN(5) == 0
		tmpl.Priority = rng.IntN(3)
		tmpl.SameZone = rng.IntN(6) == 0
		tmpl.Isolation = []string{"", api.IsolationTEERequired, api.IsolationTEEPreferred, api.IsolationStandardRequired}[rng.IntN(4)]
		if rng.IntN(4) == 0 {
			tmpl.Groups = []string{"a"}
		}
		if rng.IntN(4) == 0 {
			tmpl.GPU = &GPUNeed{Count: 1 + rng.IntN(2), Preferred: rng.IntN(2) == 0, MinVRAMGB: float64(rng.IntN(60))}
		}
		if !tmpl.SameZone && rng.IntN(3) == 0 {
			tmpl.Spread = []api.SpreadRule{{Key: []string{api.SpreadZone, api.SpreadMachine}[rng.IntN(2)], MaxSkew: 1 + rng.IntN(2)}}
		}
		if rng.IntN(5) == 0 {
			tmpl.Scoring = api.ScoringSpread
		}
		for i := 0; i < 1+rng.IntN(8); i++ {
			r := tmpl
			r.Index, r.ID = i, fmt.Sprintf("%s-%d", tmpl.Service, i)
			rs = append(rs, r)
		}
	}
	return rs
}

func run(ms []*Machine, rs []Replica) Result {
	copies := make([]*Machine, len(ms))
	for i, m := range ms {
		copies[i] = clone(m)
	}
	return Schedule(copies, append([]Replica(nil), rs...))
}

func checkInvariants(t *testing.T, ms []*Machine, rs []Replica, res Result) {
	t.Helper()
	byID := map[string]Replica{}
	for _, r := range rs {
		byID[r.ID] = r
	}
	machines := map[string]*Machine{}
	for _, m := range ms {
		machines[m.ID] = m
	}
	used := map[string]api.Resources{}
	devices := map[string]map[int]bool{}
	perService := map[string]map[string]int{}
	zoneOf := map[string]string{}
	for _, p := range res.Placements {
		r, m := byID[p.ReplicaID], machines[p.MachineID]
		used[m.ID] = used[m.ID].Add(r.Requests)
		if devices[m.ID] == nil {
			devices[m.ID] = map[int]bool{}
		}
		for _, d := range p.GPUs {
			if devices[m.ID][d] {
				t.Fatalf("GPU %d of %s given twice", d, m.ID)
			}
			devices[m.ID][d] = true
		}
		if perService[m.ID] == nil {
			perService[m.ID] = map[string]int{}
		}
		perService[m.ID][r.Service]++
		switch {
		case r.Dedicated && perService[m.ID][r.Service] > 1:
			t.Fatalf("dedicated replica %s shares machine %s", r.ID, m.ID)
		case r.Isolation == api.IsolationTEERequired && (!m.TEE || !p.TEE):
			t.Fatalf("teeRequired replica %s placed without TEE on %s", r.ID, m.ID)
		case r.Isolation == api.IsolationStandardRequired && p.TEE:
			t.Fatalf("standardRequired replica %s on the TEE runtime", r.ID)
		case len(r.Groups) > 0 && r.Groups[0] != m.Group:
			t.Fatalf("pinned replica %s in group %s", r.ID, m.Group)
		case r.GPU != nil && !r.GPU.Preferred && len(p.GPUs) != r.GPU.Count:
			t.Fatalf("replica %s needs %d GPUs, got %v", r.ID, r.GPU.Count, p.GPUs)
		}
		if r.SameZone {
			if z, ok := zoneOf[r.Service]; ok && z != m.Zone {
				t.Fatalf("sameZone service %s in zones %s and %s", r.Service, z, m.Zone)
			}
			zoneOf[r.Service] = m.Zone
		}
	}
	for _, m := range ms {
		if !m.Allocatable.Fits(api.Resources{MilliCPU: used[m.ID].MilliCPU, MemoryBytes: used[m.ID].MemoryBytes, EphemeralBytes: used[m.ID].EphemeralBytes}) {
			t.Fatalf("machine %s overcommitted: %+v > %+v", m.ID, used[m.ID], m.Allocatable)
		}
		if len(devices[m.ID]) > len(m.GPUs) {
			t.Fatalf("machine %s: %d GPUs given, has %d", m.ID, len(devices[m.ID]), len(m.GPUs))
		}
	}
	if len(res.Placements)+len(res.Unplaced) != len(rs) {
		t.Fatalf("replicas lost: %d placed + %d unplaced != %d", len(res.Placements), len(res.Unplaced), len(rs))
	}
}

func resident(m *Machine, r Replica, priority int) {
	Assign(m, r, nil)
	m.Residents = append(m.Residents, Resident{Replica: &r, Priority: priority})
}

func TestPreemptionEvictsFewestLowestPriority(t *testing.T) {
	a, b := machine("a", "g", 2000, 8), machine("b", "g", 2000, 8)
	resident(a, replica("batch", 0, 1000, 100), 0)
	resident(a, replica("batch", 1, 1000, 100), 0)
	resident(b, replica("etl", 0, 1500, 100), 1)
	resident(b, replica("web", 0, 500, 100), 5)
	urgent := replica("api", 0, 1500, 100)
	urgent.Priority, urgent.Preempt = 10, true
	res := Schedule([]*Machine{a, b}, []Replica{urgent})
	// b needs one eviction (etl-0), a needs two: b wins.
	if len(res.Placements) != 1 || res.Placements[0].MachineID != "b" {
		t.Fatalf("placements %+v unplaced %v", res.Placements, res.Unplaced)
	}
	if len(res.Evictions) != 1 || res.Evictions[0].ReplicaID != "etl-0" || res.Evictions[0].PreemptedBy != "api-0" {
		t.Fatalf("evictions %+v", res.Evictions)
	}
	if b.Allocated.MilliCPU != 2000 {
		t.Fatalf("machine b books %d millicores, want 2000", b.Allocated.MilliCPU)
	}
}

func TestNoPreemptionWithoutOptionOrOfHigherPriority(t *testing.T) {
	a := machine("a", "g", 1000, 8)
	resident(a, replica("batch", 0, 1000, 100), 0)
	r := replica("api", 0, 1000, 100)
	r.Priority = 10
	if res := Schedule([]*Machine{a}, []Replica{r}); len(res.Evictions) != 0 || len(res.Placements) != 0 {
		t.Fatalf("preempted without the option: %+v", res)
	}
	b := machine("b", "g", 1000, 8)
	resident(b, replica("core", 0, 1000, 100), 20)
	r.Preempt = true
	if res := Schedule([]*Machine{b}, []Replica{r}); len(res.Evictions) != 0 || len(res.Placements) != 0 {
		t.Fatalf("preempted a higher-priority replica: %+v", res)
	}
}

// A shared copy books and unbooks on its own counts and devices: the
// machine it was shared from stays as it was.
func TestSharedMachineLeavesTheOriginalAlone(t *testing.T) {
	m := &Machine{ID: "m", Allocatable: api.Resources{MilliCPU: 1000, MemoryBytes: 1 << 30}, ServiceCount: map[string]int{"db": 1},
		GPUs: []GPU{{Index: 0, Type: "a100"}, {Index: 1, Type: "a100"}}}
	c := m.Share()
	r := Replica{ID: "web-0", Requests: api.Resources{MilliCPU: 100}, Rules: &Rules{Service: "web"}}
	Assign(c, r, []int{1})
	Unassign(c, Replica{ID: "db-0", Rules: &Rules{Service: "db"}}, nil)
	if m.ServiceCount["web"] != 0 || m.ServiceCount["db"] != 1 || m.GPUs[1].Used || m.Allocated.MilliCPU != 0 {
		t.Fatalf("the original changed: counts %v, GPUs %+v, allocated %+v", m.ServiceCount, m.GPUs, m.Allocated)
	}
	if c.ServiceCount["web"] != 1 || c.ServiceCount["db"] != 0 || !c.GPUs[1].Used {
		t.Fatalf("the copy did not book: counts %v, GPUs %+v", c.ServiceCount, c.GPUs)
	}
}

// With nothing pending Schedule answers what a session would, without
// building one: the machines are left as they were, not ranked.
func TestScheduleWithNothingPendingTouchesNoMachine(t *testing.T) {
	a, b := machine("a", "g", 4000, 8), machine("b", "g", 4000, 8)
	b.Allocated = api.Resources{MilliCPU: 2000, MemoryBytes: 4 << 30}
	a.rank, b.rank = -7, -7
	got := Schedule([]*Machine{a, b}, nil)
	want := NewSession([]*Machine{machine("a", "g", 4000, 8)}).Place(nil, nil)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("nothing pending: %+v, a session answers %+v", got, want)
	}
	if a.rank != -7 || b.rank != -7 {
		t.Errorf("nothing pending, yet the machines were ranked (%d, %d): a session was built", a.rank, b.rank)
	}
}

// Machines of many clusters are kept apart however many there are (the
// session finds a cluster's list by name among a few, by a map past
// them): a replica of each cluster lands in its own.
func TestManyClustersKeepTheirMachines(t *testing.T) {
	var machines []*Machine
	var pending []Replica
	for i := range 3 * clustersCompared {
		cluster := fmt.Sprintf("c%02d", i)
		for j := range 3 {
			m := machine(fmt.Sprintf("%s-m%d", cluster, j), "g", 4000, 8)
			m.Cluster = cluster
			machines = append(machines, m)
		}
		r := replica("web-"+cluster, 0, 1000, 512)
		r.Rules.Cluster = cluster
		pending = append(pending, r)
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(machines), func(i, j int) { machines[i], machines[j] = machines[j], machines[i] })
	res := Schedule(machines, pending)
	if len(res.Placements) != len(pending) {
		t.Fatalf("placed %d of %d: %v", len(res.Placements), len(pending), res.Unplaced)
	}
	for _, p := range res.Placements {
		if cluster := strings.SplitN(p.ReplicaID, "-", 3)[1]; !strings.HasPrefix(p.MachineID, cluster+"-") {
			t.Errorf("%s placed on %s, outside its cluster", p.ReplicaID, p.MachineID)
		}
	}
}

// PlaceAllOn places as PlaceAll does until the first replica whose
// machine the caller refuses: random machines and replicas, with a random
// few machines refused, give PlaceAll's placements up to that replica,
// that replica unplaced and nothing booked for it or after it.
func TestPlaceAllOnStopsAtTheFirstMachineRefused(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	cut := 0
	for round := 0; round < 300; round++ {
		ms, rs := randomMachines(rng), randomReplicas(rng)
		refused := map[string]bool{}
		for _, m := range ms {
			refused[m.ID] = rng.IntN(4) == 0
		}
		whole, wholeOK := NewSession(clones(ms)).PlaceAll(slices.Clone(rs))
		on := clones(ms)
		res, ok := NewSession(on).PlaceAllOn(slices.Clone(rs), func(m *Machine) bool { return !refused[m.ID] })
		stop := slices.IndexFunc(whole.Placements, func(p Placement) bool { return refused[p.MachineID] })
		if stop < 0 {
			if ok != wholeOK || !reflect.DeepEqual(res, whole) {
				t.Fatalf("round %d: no machine refused, yet\n%+v (%v)\nagainst PlaceAll's\n%+v (%v)", round, res, ok, whole, wholeOK)
			}
			continue
		}
		cut++
		first := whole.Placements[stop].ReplicaID
		if ok || len(res.Placements) != stop || stop > 0 && !reflect.DeepEqual(res.Placements, whole.Placements[:stop]) || len(res.Unplaced) != 1 || res.Unplaced[first] == "" {
			t.Fatalf("round %d: refused at %s, got %+v (%v); PlaceAll placed %+v", round, first, res, ok, whole.Placements)
		}
		booked := map[string]int64{}
		for _, p := range res.Placements {
			booked[p.MachineID] += replicaByID(rs, p.ReplicaID).Requests.MilliCPU
		}
		for i, m := range on {
			if want := ms[i].Allocated.MilliCPU + booked[m.ID]; m.Allocated.MilliCPU != want {
				t.Fatalf("round %d: %s has %dm booked, want %dm", round, m.ID, m.Allocated.MilliCPU, want)
			}
		}
	}
	if cut == 0 {
		t.Fatal("no round refused a machine PlaceAll used: the test tried nothing")
	}
}

func replicaByID(rs []Replica, id string) Replica {
	for _, r := range rs {
		if r.ID == id {
			return r
		}
	}
	return Replica{}
}
