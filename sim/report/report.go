// Package report writes the results of `gantry simulate` side by side:
// a table of what each policy cost and did, the series over time as CSV,
// the whole as JSON, and a plot of cost, bound and pending replicas over
// time (plot.go).
package report

import (
	"cmp"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/sim"
)

// JSON writes every result whole.
func JSON(w io.Writer, results []sim.Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		Results []sim.Result `json:"results"`
	}{results})
}

// CSV writes the series: a row per policy and bucket.
func CSV(w io.Writer, results []sim.Result) error {
	cw := csv.NewWriter(w)
	if err := cw.Write([]string{"policy", "time", "cost_per_hour", "bound_per_hour", "pending_replicas", "machines"}); err != nil {
		return err
	}
	for _, r := range results {
		for _, p := range r.Series {
			row := []string{r.Policy, p.At.UTC().Format(time.RFC3339), num(p.CostPerHour, 4), num(p.BoundPerHour, 4), num(p.Pending, 2), num(p.Machines, 2)}
			if err := cw.Write(row); err != nil {
				return err
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

func num(v float64, places int) string { return strconv.FormatFloat(v, 'f', places, 64) }

// Table writes the results side by side, a column per policy, then the
// machine-hours by type.
func Table(w io.Writer, results []sim.Result) error {
	if len(results) == 0 {
		return nil
	}
	first := results[0]
	world := ""
	if first.World != "" {
		world = ", world: " + first.World
	}
	fmt.Fprintf(w, "Simulated %s to %s (%s%s).\n\n", first.Start.UTC().Format(time.RFC3339), first.End.UTC().Format(time.RFC3339),
		first.End.Sub(first.Start).Round(time.Minute), world)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(name string, cell func(sim.Result) string) {
		cells := []string{name}
		for _, r := range results {
			cells = append(cells, cell(r))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	row("POLICY", func(r sim.Result) string { return r.Policy })
	for _, m := range metrics {
		row(m.name, m.cell)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if settings := settingsOf(results); settings != "" {
		fmt.Fprintf(w, "\nSettings:\n%s", settings)
	}
	fmt.Fprintln(w, "\nMachine-hours by type:")
	return typeHours(w, results)
}

// metric is a row of the table.
type metric struct {
	name string
	cell func(sim.Result) string
}

var metrics = []metric{
	{"cost ($)", func(r sim.Result) string { return num(r.Cost, 2) }},
	{"cost per hour ($)", func(r sim.Result) string { return num(r.Cost/r.End.Sub(r.Start).Hours(), 4) }},
	{"lower bound ($)", func(r sim.Result) string { return num(r.Bound, 2) }},
	{"gap to bound", func(r sim.Result) string { return pct(r.Gap, r.Bound > 0) }},
	{"machine-hours on demand", func(r sim.Result) string { return num(hours(r, api.CapacityOnDemand), 1) }},
	{"machine-hours spot", func(r sim.Result) string { return num(hours(r, api.CapacitySpot), 1) }},
	{"replicas waited (count)", func(r sim.Result) string { return strconv.Itoa(r.Pending.Count) }},
	{"wait p50 / p99 / max", func(r sim.Result) string { return waits(r.Pending) }},
	{"replica-hours waited", func(r sim.Result) string { return num(r.Pending.ReplicaHours, 1) }},
	{"still waiting at the end", func(r sim.Result) string { return strconv.Itoa(r.WaitingAtEnd) }},
	{"replicas moved live", func(r sim.Result) string { return strconv.Itoa(r.Disruptions.ReplicasMoved) }},
	{"replicas stopped", func(r sim.Result) string { return strconv.Itoa(r.Disruptions.ReplicasStopped) }},
	{"machines launched", func(r sim.Result) string { return strconv.Itoa(r.Disruptions.Launches) }},
	{"launches short of capacity", func(r sim.Result) string { return strconv.Itoa(r.Disruptions.LaunchFailures) }},
	{"machines replaced (cheaper)", func(r sim.Result) string { return strconv.Itoa(r.Disruptions.MachinesReplaced) }},
	{"machines consolidated", func(r sim.Result) string { return strconv.Itoa(r.Disruptions.MachinesConsolidated) }},
	{"machines removed empty", func(r sim.Result) string { return strconv.Itoa(r.Disruptions.MachinesEmptied) }},
	{"terminations by cause", func(r sim.Result) string { return causes(r.Disruptions.Terminations) }},
	{"spot interruptions", func(r sim.Result) string { return strconv.Itoa(r.Spot.Interruptions) }},
	{"their replicas' wait p50 / max", func(r sim.Result) string {
		if r.Spot.Pending.Count == 0 {
			return "-"
		}
		return dur(r.Spot.Pending.P50) + " / " + dur(r.Spot.Pending.Max)
	}},
	{"passes (acting)", func(r sim.Result) string { return fmt.Sprintf("%d (%d)", r.Passes.Total, r.Passes.Acting) }},
	{"decisions per pass", func(r sim.Result) string { return num(r.Passes.StepsPerPass, 2) }},
}

func pct(v float64, ok bool) string {
	if !ok {
		return "-"
	}
	return num(100*v, 1) + "%"
}

func hours(r sim.Result, capacityType string) float64 {
	total := 0.0
	for _, th := range r.MachineHours {
		if th.CapacityType == capacityType {
			total += th.Hours
		}
	}
	return total
}

func waits(p sim.Percentiles) string {
	if p.Count == 0 {
		return "-"
	}
	return dur(p.P50) + " / " + dur(p.P99) + " / " + dur(p.Max)
}

func dur(d time.Duration) string { return d.Round(time.Second).String() }

func causes(m map[string]int) string {
	if len(m) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

func settingsOf(results []sim.Result) string {
	var sb strings.Builder
	for _, r := range results {
		over := cmp.Or(r.Over, "defaults")
		s := over
		if len(r.Settings) > 0 {
			s = strings.Join(r.Settings, " ")
			if r.Over != "" {
				s += " (over " + r.Over + ")"
			}
		}
		fmt.Fprintf(&sb, "  %s: %s\n", r.Policy, s)
	}
	return sb.String()
}

// typeHours writes the machine-hours by type and capacity type, a column
// per policy.
func typeHours(w io.Writer, results []sim.Result) error {
	type key struct{ itype, capacity string }
	var keys []key
	seen := map[key]bool{}
	for _, r := range results {
		for _, th := range r.MachineHours {
			k := key{th.InstanceType, th.CapacityType}
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	slices.SortFunc(keys, func(a, b key) int { return strings.Compare(a.itype+"|"+a.capacity, b.itype+"|"+b.capacity) })
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	header := []string{"TYPE", "CAPACITY"}
	for _, r := range results {
		header = append(header, r.Policy)
	}
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, k := range keys {
		cells := []string{k.itype, k.capacity}
		for _, r := range results {
			h := 0.0
			for _, th := range r.MachineHours {
				if th.InstanceType == k.itype && th.CapacityType == k.capacity {
					h = th.Hours
				}
			}
			cells = append(cells, num(h, 1))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// Simulation is a simulation's answer over the API: every policy's
// result, in the request's order, and the plot of them all (an SVG
// document).
type Simulation struct {
	Results []sim.Result `json:"results"`
	Plot    string       `json:"plot"`
	// LeftOut names what of the spec was not simulated (Kubernetes
	// clusters and their services, failover groups).
	LeftOut []string `json:"leftOut,omitempty"`
}
