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
	"github.com/gantry-dev/gantry/client"
	"github.com/gantry-dev/gantry/controller"
	"github.com/gantry-dev/gantry/decide"
	"github.com/gantry-dev/gantry/planner"
	"github.com/gantry-dev/gantry/provider/registry"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/spec"
	"github.com/spf13/cobra"
)

func newPlanCmd(g *globals) *cobra.Command {
	cfg := decide.DefaultConfig()
	var file, catalogFile, output string
	var offline bool
	cmd := &cobra.Command{
		Use:   "plan -f FILE [--catalog CATALOG] [-o table|json]",
		Short: "Dry run: machines to add and remove, where replicas go, $/hour and its lower bound",
		Long: "Runs one pass of the control loop's decide without acting: on the live server, which checks the file as apply " +
			"would and plans with its state, when one is configured (--server, $GANTRY_SERVER, or <data-dir>/server.url); " +
			"otherwise on empty clusters. Nothing is changed.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if file == "" {
				return errors.New("-f FILE is required")
			}
			if output != formatTable && output != formatJSON {
				return fmt.Errorf("--output %q: want table or json", output)
			}
			data, err := readSpecFile(file)
			if err != nil {
				return err
			}
			providers := describedProviders()
			docs, err := spec.Parse(file, data, providers)
			if err != nil {
				return err
			}
			plan, source, err := livePlan(cmd.Context(), g, offline || catalogFile != "", data)
			if err != nil {
				return err
			}
			if plan == nil {
				if plan, err = offlinePlan(cfg, providers, catalogFile, docs); err != nil {
					return err
				}
			}
			if output == formatJSON {
				return printStructured(g.out, formatJSON, plan)
			}
			printPlan(g.out, *plan, source)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&file, "filename", "f", "", "spec file (YAML or JSON)")
	f.StringVar(&catalogFile, "catalog", "", "instance-type catalog (JSON or YAML) to price an offline plan with, instead of the providers' built-in ones (implies --offline)")
	f.StringVarP(&output, "output", "o", formatTable, "output format: table or json")
	f.BoolVar(&offline, "offline", false, "plan against empty clusters even when a server is configured")
	f.Float64Var(&cfg.Planner.SavingsFloor, "savings-floor", cfg.Planner.SavingsFloor, "offline: least saving for replacing a machine with a cheaper one")
	f.DurationVar(&cfg.Planner.MinLifetime, "min-lifetime", cfg.Planner.MinLifetime, "offline: machines younger than this are never consolidated")
	f.IntVar(&cfg.Planner.MaxRemovals, "max-removals", cfg.Planner.MaxRemovals, "offline: most machines removed at once")
	return cmd
}

// livePlan asks the configured server for the plan; nil when there is no
// server to ask (or offline), with where the plan comes from.
func livePlan(ctx context.Context, g *globals, offline bool, data []byte) (*planner.Plan, string, error) {
	if offline {
		return nil, "empty clusters", nil
	}
	explicit := g.server != ""
	if !explicit {
		if _, err := os.Stat(filepath.Join(g.dataDir, "server.url")); err != nil {
			return nil, "empty clusters", nil
		}
	}
	c, err := g.client()
	if err == nil {
		var plan *planner.Plan
		if plan, err = c.Plan(ctx, data); err == nil {
			return plan, "the live server", nil
		}
		var apiErr *client.APIError
		if errors.As(err, &apiErr) {
			return nil, "", err // the server refused the file: as apply would
		}
	}
	if explicit {
		return nil, "", err
	}
	fmt.Fprintf(g.errOut, "note: the server in %s did not answer (%v); planning against empty clusters\n", g.dataDir, err)
	return nil, "empty clusters", nil
}

// offlinePlan decides on empty clusters, priced with the catalog file or
// the providers' built-in catalogs.
func offlinePlan(cfg decide.Config, providers *registry.Registry, catalogFile string, docs []spec.Document) (*planner.Plan, error) {
	var catalog []provisioner.InstanceType
	if catalogFile != "" {
		data, err := os.ReadFile(catalogFile)
		if err != nil {
			return nil, fmt.Errorf("read catalog: %w", err)
		}
		if catalog, err = spec.ParseCatalog(catalogFile, data); err != nil {
			return nil, err
		}
	}
	var clusters []*api.Cluster
	var services []*api.Service
	for _, d := range docs {
		if d.Cluster != nil {
			// A Kubernetes cluster has no machines to plan: its API server
			// places the Pods.
			if _, ok := providers.Catalog(d.Cluster.Spec.Provider); !ok && catalog == nil && !d.Cluster.Kubernetes() {
				return nil, fmt.Errorf("cluster %s: provider %q has no built-in catalog: pass --catalog FILE", d.Name(), d.Cluster.Spec.Provider.Name)
			}
			clusters = append(clusters, d.Cluster)
		} else if d.Service != nil {
			services = append(services, d.Service)
		} else if d.FailoverGroup != nil {
			services = append(services, spec.FailoverMembers(d.FailoverGroup)...)
		}
	}
	snap := controller.OfflineSnapshot(providers, catalog, clusters, services)
	plan := decide.Decide(cfg, snap, decide.NewMemory(), time.Now()).Capacity
	return &plan, nil
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
