package cli

import (
	"fmt"
	"sort"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/gantry-dev/gantry/api"
)

func newTopCmd(g *globals) *cobra.Command {
	var selector, sortBy string
	cmd := &cobra.Command{
		Use:   "top (machines | replicas)",
		Short: "Show the CPU and memory machines' replicas use now, as their agents last measured it (every 10 s)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, err := canonicalKind(args[0])
			if err != nil {
				return err
			}
			if kind != "machines" && kind != "replicas" {
				return fmt.Errorf("top shows machines or replicas, not %s", kind)
			}
			if sortBy != "" && sortBy != "cpu" && sortBy != "memory" {
				return fmt.Errorf("--sort-by %q: want cpu or memory", sortBy)
			}
			sel, err := labels.Parse(selector)
			if err != nil {
				return fmt.Errorf("--selector %q: %w", selector, err)
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			report, err := c.Usage(cmd.Context())
			if err != nil {
				return err
			}
			for _, s := range report.Unreached {
				fmt.Fprintln(g.errOut, "warning: no usage from server "+s+": its machines are left out")
			}
			var t *table
			if kind == "machines" {
				machines, err := c.ListMachines(cmd.Context(), "")
				if err != nil {
					return err
				}
				t = machineUsageTable(report, machines, sel)
			} else {
				replicas, err := c.ListReplicas(cmd.Context(), "")
				if err != nil {
					return err
				}
				services, err := c.ListServices(cmd.Context())
				if err != nil {
					return err
				}
				t = replicaUsageTable(report, replicas, services, sel)
			}
			if len(t.rows) == 0 {
				fmt.Fprintln(g.errOut, "No usage reported yet (agents measure every 10 s; a replica needs two measurements).")
				return nil
			}
			sortUsage(t, sortBy)
			return t.print(g.out, false)
		},
	}
	cmd.Flags().StringVarP(&selector, "selector", "l", "", "label selector (a machine's labels; a replica's own and its service's)")
	cmd.Flags().StringVar(&sortBy, "sort-by", "", "cpu or memory (highest first)")
	return cmd
}

func machineUsageTable(report *api.UsageReport, machines []api.Machine, sel labels.Selector) *table {
	byID := map[string]api.Machine{}
	for _, m := range machines {
		byID[m.ID] = m
	}
	t := &table{header: []string{"NAME", "CPU(cores)", "CPU%", "MEMORY", "MEMORY%"}}
	for _, u := range report.Machines {
		m, ok := byID[u.Machine]
		if !ok || !sel.Matches(labels.Set(m.Labels)) {
			continue
		}
		t.add(u.Machine, api.FormatCPU(u.Usage.MilliCPU), percent(u.Usage.MilliCPU, m.Allocatable.MilliCPU),
			api.FormatBytes(u.Usage.MemoryBytes), percent(u.Usage.MemoryBytes, m.Allocatable.MemoryBytes))
		t.sortKeys = append(t.sortKeys, [2]int64{u.Usage.MilliCPU, u.Usage.MemoryBytes})
	}
	return t
}

func replicaUsageTable(report *api.UsageReport, replicas []api.Replica, services []api.Service, sel labels.Selector) *table {
	serviceLabels := map[string]map[string]string{}
	for _, s := range services {
		serviceLabels[s.Metadata.Name] = s.Metadata.Labels
	}
	byID := map[string]api.Replica{}
	for _, r := range replicas {
		byID[r.ID] = r
	}
	t := &table{header: []string{"NAME", "CPU(cores)", "CPU%REQ", "MEMORY", "MEMORY%REQ", "SERVICE", "MACHINE"}}
	for _, m := range report.Machines {
		for id, u := range m.Replicas {
			r, ok := byID[id]
			if !ok || !sel.Matches(labels.Merge(serviceLabels[r.Service], r.Labels)) {
				continue
			}
			t.add(id, api.FormatCPU(u.MilliCPU), percent(u.MilliCPU, r.Requests.MilliCPU), api.FormatBytes(u.MemoryBytes),
				percent(u.MemoryBytes, r.Requests.MemoryBytes), r.Service, m.Machine)
			t.sortKeys = append(t.sortKeys, [2]int64{u.MilliCPU, u.MemoryBytes})
		}
	}
	return t
}

func percent(used, of int64) string {
	if of <= 0 {
		return "-"
	}
	return fmt.Sprintf("%d%%", used*100/of)
}

// sortUsage orders rows by name, or by cpu or memory, highest first.
func sortUsage(t *table, by string) {
	idx := make([]int, len(t.rows))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool {
		ka, kb := t.sortKeys[idx[a]], t.sortKeys[idx[b]]
		switch by {
		case "cpu":
			return ka[0] > kb[0]
		case "memory":
			return ka[1] > kb[1]
		}
		return naturalLess(t.rows[idx[a]][0], t.rows[idx[b]][0])
	})
	rows := make([][]string, len(idx))
	for i, k := range idx {
		rows[i] = t.rows[k]
	}
	t.rows = rows
}
