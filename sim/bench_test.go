package sim

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// diurnalTrace is a span of demand at one-minute steps for services
// services whose replicas follow a day's curve (peak at noon, a third
// lower at night) around base each, phase-shifted per service: a row
// whenever a service's count changes.
func diurnalTrace(services, base int, span time.Duration) string {
	var sb strings.Builder
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	last := make([]int, services)
	for i := range last {
		last[i] = -1
	}
	minutes := int(span / time.Minute)
	for minute := 0; minute <= minutes; minute++ {
		at := start.Add(time.Duration(minute) * time.Minute)
		for s := 0; s < services; s++ {
			phase := 2 * math.Pi * (float64(minute)/(24*60) + float64(s)/float64(3*services))
			n := int(math.Round(float64(base) * (1 + 0.3*math.Sin(phase))))
			if n != last[s] || minute == minutes {
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
func BenchmarkSimulateFleet1000Day(b *testing.B) { benchFleet(b, 20, 280, day) }

func BenchmarkSimulateFleet200Day(b *testing.B) { benchFleet(b, 10, 100, day) }

// BenchmarkSimulateFleet1000Month: the 1,000-machine fleet's day, 30 times
// over: the first target, measured whole rather than extrapolated
// from a day (whose first hour is the fleet's launch). GANTRY_SIM_DAYS
// sets another number of days, for quicker comparisons.
func BenchmarkSimulateFleet1000Month(b *testing.B) {
	days := 30
	if v := os.Getenv("GANTRY_SIM_DAYS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			b.Fatalf("GANTRY_SIM_DAYS=%q: want a positive number of days", v)
		}
		days = n
	}
	benchFleet(b, 20, 280, time.Duration(days)*day)
}

// BenchmarkSimulateFleet10000Hours: the first hours of a fleet of about
// 10,000 machines (40 services of about 1,540 replicas), at one-minute
// steps: the 7-day target's scale, measured over a span short enough to
// run (GANTRY_SIM_SPAN, a duration, 2h unless set; the first hour is the
// fleet's launch).
func BenchmarkSimulateFleet10000Hours(b *testing.B) {
	span := 2 * time.Hour
	if v := os.Getenv("GANTRY_SIM_SPAN"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			b.Fatalf("GANTRY_SIM_SPAN=%q: want a positive duration such as 10m or 1h", v)
		}
		span = d
	}
	benchFleet(b, 40, 1540, span)
}

const day = 24 * time.Hour

func benchFleet(b *testing.B, services, base int, span time.Duration) {
	s := testSetup(b, diurnalTrace(services, base, span), serviceNames(services)...)
	s.Clusters[0].Spec.CapacityGroups[0].MaxSize = 50000
	s.LabelPasses = os.Getenv("GANTRY_SIM_LABELS") != "" // for -cpuprofile: go tool pprof -tags
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		policy := defaultPolicy()
		// Each look from the last look's records checked against a walk of
		// every machine (slower; a panic names the first difference).
		policy.Config.Planner.CheckLookRecords = os.Getenv("GANTRY_SIM_CHECK") != ""
		res, err := Simulate(s, policy)
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
