package scheduler

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/gantry-dev/gantry/api"
)

// karpenterMix draws requests the way Karpenter's scheduling benchmark
// does: CPU from {100m, 250m, 500m, 1000m, 1500m}, memory 100Mi–4Gi.
func karpenterMix(rng *rand.Rand) api.Resources {
	cpus := []int64{100, 250, 500, 1000, 1500}
	return api.Resources{MilliCPU: cpus[rng.IntN(len(cpus))], MemoryBytes: int64(100+rng.IntN(4096-100)) << 20}
}

// placementFixture: machines of 16 CPU / 64Gi in 3 zones, and services of
// 100 replicas, one fifth of them spread (zone and machine alternately).
func placementFixture(machines, replicas int) ([]*Machine, []Replica) {
	rng := rand.New(rand.NewPCG(42, 42))
	ms := make([]*Machine, machines)
	for i := range ms {
		ms[i] = &Machine{ID: fmt.Sprintf("m%05d", i), Cluster: "c", Group: "g", Zone: fmt.Sprintf("z%d", i%3),
			Runtimes: []string{RuntimeDocker}, Allocatable: api.Resources{MilliCPU: 16000, MemoryBytes: 64 << 30, EphemeralBytes: 100 << 30}}
	}
	const perService = 100
	rs := make([]Replica, 0, replicas)
	for s := 0; len(rs) < replicas; s++ {
		tmpl := Replica{Requests: karpenterMix(rng), Rules: &Rules{Service: fmt.Sprintf("svc%04d", s), Cluster: "c", Runtime: RuntimeDocker}}
		if s%5 == 0 {
			key := api.SpreadZone
			if s%10 == 0 {
				key = api.SpreadMachine
			}
			tmpl.Spread = []api.SpreadRule{{Key: key, MaxSkew: 1}}
		}
		for i := 0; i < perService && len(rs) < replicas; i++ {
			r := tmpl
			r.Index, r.ID = i, fmt.Sprintf("%s-%d", tmpl.Service, i)
			rs = append(rs, r)
		}
	}
	return ms, rs
}

func cloneAll(ms []*Machine) []*Machine {
	out := make([]*Machine, len(ms))
	for i, m := range ms {
		c := *m
		out[i] = &c
	}
	return out
}

// BenchmarkPlace100kOn10k: 100,000 replicas onto 10,000 machines.
func BenchmarkPlace100kOn10k(b *testing.B) { benchPlace(b, 10000, 100000) }

// BenchmarkPlace1MOn100k: ten times that (issue 15's scale).
func BenchmarkPlace1MOn100k(b *testing.B) { benchPlace(b, 100000, 1000000) }

func benchPlace(b *testing.B, machines, replicas int) {
	ms, rs := placementFixture(machines, replicas)
	b.ReportAllocs()
	var heapPeak uint64
	for b.Loop() {
		b.StopTimer()
		fresh := cloneAll(ms)
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		b.StartTimer()
		res := Schedule(fresh, rs)
		b.StopTimer()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		heapPeak = max(heapPeak, after.HeapAlloc)
		if len(res.Unplaced) != 0 {
			b.Fatalf("%d replicas unplaced, e.g. %v", len(res.Unplaced), firstOf(res.Unplaced))
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(len(rs))*float64(b.N)/b.Elapsed().Seconds(), "placements/s")
	b.ReportMetric(float64(heapPeak)/(1<<20), "heap-MiB")
}

func firstOf(m map[string]string) string {
	for k, v := range m {
		return k + ": " + v
	}
	return ""
}
