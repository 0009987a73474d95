package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/controller"
	"github.com/gantry-dev/gantry/planner"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/spec"
	"github.com/spf13/cobra"
)

func newPlanCmd(g *globals) *cobra.Command {
	cfg := planner.DefaultConfig()
	var file, catalogFile, output string
	var offline bool
	cmd := &cobra.Command{
		Use:   "plan -f FILE [--catalog CATALOG] [-o table|json]",
		Short: "Dry run: machines to add and remove, where replicas go, $/hour and its lower bound",
		Long: "Computes what the control loop would do for the spec: against the live server's state when one is configured " +
			"(--server, $GANTRY_SERVER, or <data-dir>/server.url), otherwise against empty clusters. Nothing is changed.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if file == "" {
				return errors.New("-f FILE is required")
			}
			if output != formatTable && output != formatJSON {
				return fmt.Errorf("--output %q: want table or json", output)
			}
			catalogs, err := planCatalogs(catalogFile)
			if err != nil {
				return err
			}
			data, err := readSpecFile(file)
			if err != nil {
				return err
			}
			docs, err := spec.Parse(file, data, func(name string) ([]provisioner.InstanceType, bool) { return catalogs(api.ProviderSpec{Name: name}) })
			if err != nil {
				return err
			}
			if err := checkCatalogs(docs, catalogs); err != nil {
				return err
			}
			st, source, err := planState(cmd.Context(), g, offline)
			if err != nil {
				return err
			}
			mergeDocs(&st, docs)
			plan := controller.DryRun(cfg, st, catalogs, time.Now())
			if output == formatJSON {
				return printStructured(g.out, formatJSON, plan)
			}
			printPlan(g.out, plan, source)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&file, "filename", "f", "", "spec file (YAML or JSON)")
	f.StringVar(&catalogFile, "catalog", "", "instance-type catalog (JSON or YAML) to price with, instead of the providers' built-in ones")
	f.StringVarP(&output, "output", "o", formatTable, "output format: table or json")
	f.BoolVar(&offline, "offline", false, "plan against empty clusters even when a server is configured")
	f.Float64Var(&cfg.SavingsFloor, "savings-floor", cfg.SavingsFloor, "least saving for replacing a machine with a cheaper one")
	f.DurationVar(&cfg.MinLifetime, "min-lifetime", cfg.MinLifetime, "machines younger than this are never consolidated")
	f.IntVar(&cfg.MaxRemovals, "max-removals", cfg.MaxRemovals, "most machines removed at once")
	return cmd
}

func planCatalogs(path string) (controller.Catalogs, error) {
	if path == "" {
		return builtinPlanCatalogs, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read catalog: %w", err)
	}
	types, err := spec.ParseCatalog(path, data)
	if err != nil {
		return nil, err
	}
	return func(api.ProviderSpec) ([]provisioner.InstanceType, bool) { return types, true }, nil
}

func checkCatalogs(docs []spec.Document, catalogs controller.Catalogs) error {
	for _, d := range docs {
		if d.Cluster == nil {
			continue
		}
		if _, ok := catalogs(d.Cluster.Spec.Provider); !ok {
			return fmt.Errorf("cluster %s: provider %q has no built-in catalog: pass --catalog FILE", d.Name(), d.Cluster.Spec.Provider.Name)
		}
	}
	return nil
}

// planState reads the live server's state when one is configured.
func planState(ctx context.Context, g *globals, offline bool) (controller.State, string, error) {
	if offline {
		return controller.State{}, "empty clusters", nil
	}
	explicit := g.server != ""
	if !explicit {
		if _, err := os.Stat(filepath.Join(g.dataDir, "server.url")); err != nil {
			return controller.State{}, "empty clusters", nil
		}
	}
	st, err := fetchState(ctx, g)
	if err != nil {
		if explicit {
			return st, "", err
		}
		fmt.Fprintf(g.errOut, "note: the server in %s did not answer (%v); planning against empty clusters\n", g.dataDir, err)
		return controller.State{}, "empty clusters", nil
	}
	return st, "the live server", nil
}

func fetchState(ctx context.Context, g *globals) (controller.State, error) {
	var st controller.State
	c, err := g.client()
	if err != nil {
		return st, err
	}
	clusters, err := c.ListClusters(ctx)
	if err != nil {
		return st, err
	}
	services, err := c.ListServices(ctx)
	if err != nil {
		return st, err
	}
	machines, err := c.ListMachines(ctx, "")
	if err != nil {
		return st, err
	}
	replicas, err := c.ListReplicas(ctx, "")
	if err != nil {
		return st, err
	}
	for i := range clusters {
		st.Clusters = append(st.Clusters, &clusters[i])
	}
	for i := range services {
		st.Services = append(st.Services, &services[i])
	}
	for i := range machines {
		st.Machines = append(st.Machines, &machines[i])
	}
	for i := range replicas {
		st.Replicas = append(st.Replicas, &replicas[i])
	}
	return st, nil
}

// mergeDocs lets the file's resources replace the live ones of the same name.
func mergeDocs(st *controller.State, docs []spec.Document) {
	for _, d := range docs {
		if d.Cluster != nil {
			st.Clusters = replaceByName(st.Clusters, d.Cluster, func(c *api.Cluster) string { return c.Metadata.Name })
		} else {
			st.Services = replaceByName(st.Services, d.Service, func(s *api.Service) string { return s.Metadata.Name })
		}
	}
}

func replaceByName[T any](list []*T, item *T, name func(*T) string) []*T {
	for i, x := range list {
		if name(x) == name(item) {
			list[i] = item
			return list
		}
	}
	return append(list, item)
}

func printPlan(w io.Writer, p planner.Plan, source string) {
	fmt.Fprintf(w, "Plan against %s.\n", source)
	section(w, "Machines to add")
	if len(p.Add) == 0 {
		fmt.Fprintln(w, "none")
	} else {
		t := &table{header: []string{"KEY", "GROUP", "TYPE", "ZONE", "CAPACITY", "$/H", "REPLICAS", "REASON"}}
		for _, nm := range p.Add {
			t.add(nm.Key, nm.Cluster+"/"+nm.Group, nm.InstanceType, orDash(nm.Zone), nm.CapacityType, fmt.Sprintf("%.4f", nm.PricePerHour), fmt.Sprint(len(nm.Replicas)), nm.Reason)
		}
		_ = t.print(w, false)
	}
	section(w, "Machines to remove")
	if len(p.Remove) == 0 {
		fmt.Fprintln(w, "none")
	} else {
		t := &table{header: []string{"MACHINE", "GROUP", "$/H", "REASON"}}
		for _, r := range p.Remove {
			t.add(r.MachineID, r.Cluster+"/"+r.Group, fmt.Sprintf("%.4f", r.PricePerHour), r.Reason)
		}
		_ = t.print(w, false)
	}
	section(w, "Replicas")
	t := &table{header: []string{"REPLICA", "MACHINE", "NOTE"}}
	for _, pl := range p.Placements {
		t.add(pl.Replica, pl.Machine, orDash(pl.Note))
	}
	for _, pr := range p.Pending {
		t.add(pr.Replica, "(pending)", pr.Reason)
	}
	if len(t.rows) == 0 {
		fmt.Fprintln(w, "none")
	} else {
		_ = t.print(w, false)
	}
	section(w, "Cost")
	fmt.Fprintf(w, "$/hour before: %.4f   after: %.4f\n", p.CostBefore, p.CostAfter)
	if p.LowerBound > 0 {
		fmt.Fprintf(w, "new capacity: %.4f $/h, lower bound %.4f $/h (LP relaxation over the allowed types), gap %.1f%%\n", p.NewCapacityCost, p.LowerBound, 100*p.Gap)
	}
	keys := make([]string, 0, len(p.Desired))
	for k := range p.Desired {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, p.Desired[k]))
	}
	fmt.Fprintf(w, "desired machines: %s\n", strings.Join(parts, " "))
}
