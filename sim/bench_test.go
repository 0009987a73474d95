package sim

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

// diurnalTrace is days of demand at one-minute steps for services
// services whose replicas follow a day's curve (peak at noon, a third
// lower at night) around base each, phase-shifted per service: a row
// whenever a service's count changes.
func diurnalTrace(services, base, days int) string {
	var sb strings.Builder
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	last := make([]int, services)
	for i := range last {
		last[i] = -1
	}
	for minute := 0; minute <= days*24*60; minute++ {
		at := start.Add(time.Duration(minute) * time.Minute)
		for s := 0; s < services; s++ {
			phase := 2 * math.Pi * (float64(minute)/(24*60) + float64(s)/float64(3*services))
			n := int(math.Round(float64(base) * (1 + 0.3*math.Sin(phase))))
			if n != last[s] || minute == days*24*60 {
				fmt.Fprintf(&sb, "%s,svc-%02d,%d\n", at.Format(time.RFC3339), s, n)
				last[s] = n
			}
		}
	}
	return sb.String()
}

func serviceNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("svc-%02d", i)
	}
	return out
}

// BenchmarkSimulateFleet1000Day: a day of a fleet of about 1,000 machines
// (20 services of about 280 replicas of 500m and 1Gi, on the harness
// catalog's 4-CPU machines), at one-minute steps.
func BenchmarkSimulateFleet1000Day(b *testing.B) { benchFleet(b, 20, 280, 1) }

func BenchmarkSimulateFleet200Day(b *testing.B) { benchFleet(b, 10, 100, 1) }

func benchFleet(b *testing.B, services, base, days int) {
	s := testSetup(b, diurnalTrace(services, base, days), serviceNames(services)...)
	s.Clusters[0].Spec.CapacityGroups[0].MaxSize = 5000
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := Simulate(s, defaultPolicy())
		if err != nil {
			b.Fatal(err)
		}
		peak := 0.0
		for _, p := range res.Series {
			peak = max(peak, p.Machines)
		}
		b.ReportMetric(peak, "peak-machines")
		b.ReportMetric(float64(res.Passes.Total), "passes")
		b.ReportMetric(res.Cost, "$")
	}
}
