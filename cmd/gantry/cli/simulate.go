package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/controller"
	"github.com/gantry-dev/gantry/decide"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/sim"
	"github.com/gantry-dev/gantry/sim/policy"
	"github.com/gantry-dev/gantry/sim/report"
	"github.com/gantry-dev/gantry/sim/trace"
	"github.com/gantry-dev/gantry/spec"
)

// Trace formats.
const (
	traceCSV     = "csv"
	traceAzure   = "azure-vmtable"
	traceAlibaba = "alibaba-containers"
	formatCSV    = "csv"
)

type simulateFlags struct {
	file, traceFile, traceFormat, catalogFile, worldFile, output, plotFile, until, spotPrices string
	// traceStart, mapping and memoryFull read the public traces' tables.
	traceStart, memoryFull string
	mapping                []string
	policies               []string
	seed                   uint64
	gcPercent              int
}

func newSimulateCmd(g *globals) *cobra.Command {
	var f simulateFlags
	cmd := &cobra.Command{
		Use:   "simulate -f SPEC --trace TRACE [--policy FILE]... [-o table|json|csv] [--plot OUT.svg]",
		Short: "Replay a trace of demand through the real control loop, offline, and compare policies",
		Long: "Runs the control loop's own decide, pass after pass, on a simulated clock over the trace's demand, with a simulated " +
			"provider (launch and boot latencies, capacity errors, spot interruptions: --world) answering its calls. Each --policy " +
			"is a YAML mapping of gantry server's decision settings (and capacity-type, warm-pool, warm-pool-state for every group) " +
			"run over the same trace and seed; the results are reported side by side. Nothing is launched. See docs/simulate.md.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return runSimulate(g, f) },
	}
	fl := cmd.Flags()
	fl.StringVarP(&f.file, "filename", "f", "", "spec file (YAML or JSON): the clusters and services to simulate")
	fl.StringVar(&f.traceFile, "trace", "", "demand trace: CSV of time,service,replicas[,cpu,memory,gpu] (see docs/simulate.md)")
	fl.StringVar(&f.traceFormat, "trace-format", traceCSV, "trace format: csv, azure-vmtable (the Azure Public Dataset's vmtable.csv) or alibaba-containers (cluster-trace-v2018's container_meta.csv)")
	fl.StringSliceVar(&f.mapping, "map", nil, "azure-vmtable, alibaba-containers: KEY=SERVICE, the spec service a VM category's VMs or an app_du's containers are replicas of; * for every key not named (repeatable)")
	fl.StringVar(&f.traceStart, "trace-start", "2026-01-01T00:00:00Z", "azure-vmtable, alibaba-containers: the time the table's second 0 is")
	fl.StringVar(&f.memoryFull, "memory-full", "", "alibaba-containers: the memory a mem_size of 100 stands for (such as 96Gi)")
	fl.StringVar(&f.catalogFile, "catalog", "", "instance-type catalog (JSON or YAML) instead of the providers' built-in ones")
	fl.StringSliceVar(&f.policies, "policy", nil, "policy file: a YAML mapping of server settings (repeatable; none: the defaults)")
	fl.StringVar(&f.spotPrices, "spot-prices", "", "spot price trace: CSV of time,instanceType,zone,price (spot prices change over time)")
	fl.StringVar(&f.worldFile, "world", "", "world file: launch, boot and terminate latencies, capacity errors, spot interruptions, over the default world (the local provider's when every cluster is on it, else a public cloud's; docs/simulate.md)")
	fl.Uint64Var(&f.seed, "seed", 1, "seed of the world's draws: the same inputs and seed give the same results")
	fl.StringVar(&f.until, "until", "", "stop at this RFC 3339 time (default: the trace's last row)")
	fl.StringVarP(&f.output, "output", "o", formatTable, "output format: table, json, or csv (the series over time)")
	fl.StringVar(&f.plotFile, "plot", "", "also draw cost, lower bound and replicas waiting over time for every policy into this SVG file")
	fl.IntVar(&f.gcPercent, "gc-percent", 400, "Go's GC target for the run (GOGC, when set, wins): a simulation allocates fast and keeps little, so collecting less often makes it about a third quicker for a few times its live memory")
	return cmd
}

func runSimulate(g *globals, f simulateFlags) error {
	switch {
	case f.file == "":
		return errors.New("-f SPEC is required")
	case f.traceFile == "":
		return errors.New("--trace FILE is required")
	case f.output != formatTable && f.output != formatJSON && f.output != formatCSV:
		return fmt.Errorf("--output %q: want table, json or csv", f.output)
	}
	if _, set := os.LookupEnv("GOGC"); !set && f.gcPercent != 0 {
		defer debug.SetGCPercent(debug.SetGCPercent(f.gcPercent))
	}
	setup, err := simulationSetup(f)
	if err != nil {
		return err
	}
	policies, err := readPolicies(f.policies)
	if err != nil {
		return err
	}
	results, err := simulateAll(g, setup, policies)
	if err != nil {
		return err
	}
	if f.plotFile != "" {
		if err := writeFile(f.plotFile, func(w io.Writer) error { return report.Plot(w, results) }); err != nil {
			return err
		}
	}
	switch f.output {
	case formatJSON:
		return report.JSON(g.out, results)
	case formatCSV:
		return report.CSV(g.out, results)
	}
	return report.Table(g.out, results)
}

// simulateAll runs the policies side by side, telling of each as it ends.
func simulateAll(g *globals, setup sim.Setup, policies []sim.Policy) ([]sim.Result, error) {
	return sim.SimulateAll(context.Background(), setup, policies, func(p sim.Policy, res sim.Result, took time.Duration) {
		fmt.Fprintf(g.errOut, "policy %s: %d passes in %s\n", p.Name, res.Passes.Total, took.Round(time.Millisecond))
		if n := res.Passes.Unsettled; n > 0 {
			fmt.Fprintf(g.errOut, "policy %s: warning: at %d instants the control loop still acted after %d passes in a row "+
				"(many such instants mean it undoes what it did, pass after pass; see docs/simulate.md)\n", p.Name, n, setup.World.MaxPassesPerInstant)
		}
	})
}

func writeFile(path string, write func(io.Writer) error) error {
	out, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--plot: %w", err)
	}
	if err := write(out); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// simulationSetup reads the spec, catalog, world and trace, each checked
// before anything runs.
func simulationSetup(f simulateFlags) (sim.Setup, error) {
	data, err := readSpecFile(f.file)
	if err != nil {
		return sim.Setup{}, err
	}
	providers := describedProviders()
	docs, err := spec.Parse(f.file, data, providers)
	if err != nil {
		return sim.Setup{}, err
	}
	var catalog []provisioner.InstanceType
	if f.catalogFile != "" {
		raw, err := os.ReadFile(f.catalogFile)
		if err != nil {
			return sim.Setup{}, fmt.Errorf("read catalog: %w", err)
		}
		if catalog, err = spec.ParseCatalog(f.catalogFile, raw); err != nil {
			return sim.Setup{}, err
		}
	}
	var clusters []*api.Cluster
	var services []*api.Service
	for _, d := range docs {
		switch {
		case d.Cluster != nil:
			clusters = append(clusters, d.Cluster)
		case d.Service != nil:
			services = append(services, d.Service)
		case d.FailoverGroup != nil:
			return sim.Setup{}, fmt.Errorf("%s: failover group %s: failover groups are not simulated", f.file, d.Name())
		}
	}
	snap := controller.OfflineSnapshot(providers, catalog, clusters, services)
	setup := sim.Setup{Clusters: clusters, Services: services, Catalogs: snap.Catalogs, Providers: snap.Providers, Seed: f.seed}
	setup.World, setup.WorldName = sim.WorldFor(clusters)
	if f.worldFile != "" {
		raw, err := os.ReadFile(f.worldFile)
		if err != nil {
			return sim.Setup{}, fmt.Errorf("read world: %w", err)
		}
		if setup.World, err = sim.ReadWorld(setup.World, f.worldFile, raw); err != nil {
			return sim.Setup{}, err
		}
		setup.WorldName = filepath.Base(f.worldFile) + " over " + setup.WorldName
	}
	if f.until != "" {
		if setup.End, err = trace.ParseTime(f.until); err != nil {
			return sim.Setup{}, fmt.Errorf("--until: %w", err)
		}
	}
	if setup.Trace, err = readTrace(f, services); err != nil {
		return sim.Setup{}, err
	}
	if f.spotPrices != "" {
		if setup.SpotPrices, err = readSpotPrices(f.spotPrices, snap.Catalogs); err != nil {
			return sim.Setup{}, err
		}
	}
	return setup, setup.Check()
}

func readTrace(f simulateFlags, services []*api.Service) (trace.Trace, error) {
	in, err := os.Open(f.traceFile)
	if err != nil {
		return trace.Trace{}, fmt.Errorf("read trace: %w", err)
	}
	defer in.Close()
	known := trace.Names(services)
	var tr trace.Trace
	switch f.traceFormat {
	case traceCSV:
		tr, err = trace.ReadCSV(in, known)
	case traceAzure, traceAlibaba:
		tr, err = readTable(f, in, known)
	default:
		return trace.Trace{}, fmt.Errorf("--trace-format %q: want csv, azure-vmtable or alibaba-containers", f.traceFormat)
	}
	if err != nil {
		return trace.Trace{}, fmt.Errorf("trace %s: %w", f.traceFile, err)
	}
	return tr, nil
}

// readTable reads a public trace's table through its adapter.
func readTable(f simulateFlags, in io.Reader, known map[string]bool) (trace.Trace, error) {
	start, err := trace.ParseTime(f.traceStart)
	if err != nil {
		return trace.Trace{}, fmt.Errorf("--trace-start: %w", err)
	}
	services, err := serviceMap(f.traceFormat, f.mapping, known)
	if err != nil {
		return trace.Trace{}, err
	}
	if f.traceFormat == traceAzure {
		return trace.ReadAzureVMTable(in, start, services)
	}
	if f.memoryFull == "" {
		return trace.Trace{}, errors.New("--trace-format alibaba-containers needs --memory-full, the memory a mem_size of 100 stands for (such as 96Gi)")
	}
	full, err := api.ParseBytes(f.memoryFull)
	if err != nil {
		return trace.Trace{}, fmt.Errorf("--memory-full: %w", err)
	}
	return trace.ReadAlibabaContainers(in, start, services, full)
}

func serviceMap(format string, pairs []string, known map[string]bool) (map[string]string, error) {
	if len(pairs) == 0 {
		return nil, fmt.Errorf("--trace-format %s needs --map KEY=SERVICE (a VM category or app_du, or * for all)", format)
	}
	out := map[string]string{}
	for _, p := range pairs {
		key, service, ok := strings.Cut(p, "=")
		if !ok || key == "" || service == "" {
			return nil, fmt.Errorf("--map %q: want KEY=SERVICE", p)
		}
		if !known[service] {
			return nil, fmt.Errorf("--map %q: the spec has no service %s", p, service)
		}
		out[key] = service
	}
	return out, nil
}

func readSpotPrices(file string, catalogs map[string]decide.ClusterProvider) ([]trace.PriceChange, error) {
	in, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("read spot prices: %w", err)
	}
	defer in.Close()
	offered := func(instanceType, zone string) bool {
		for _, cp := range catalogs {
			if it, ok := provisioner.FindInstanceType(cp.Catalog, instanceType); ok {
				for _, o := range it.Offerings {
					if o.Zone == zone && o.CapacityType == api.CapacitySpot {
						return true
					}
				}
			}
		}
		return false
	}
	prices, err := trace.ReadSpotPrices(in, offered)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return prices, nil
}

// readPolicies reads the policy files; none is the defaults.
func readPolicies(files []string) ([]sim.Policy, error) {
	if len(files) == 0 {
		return []sim.Policy{{Name: "default", Config: decide.DefaultConfig()}}, nil
	}
	var read []policy.Policy
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("read policy: %w", err)
		}
		p, err := policy.Read(file, data)
		if err != nil {
			return nil, err
		}
		read = append(read, p)
	}
	if err := policy.CheckNames(read); err != nil {
		return nil, err
	}
	out := make([]sim.Policy, 0, len(read))
	for _, p := range read {
		sp, err := policy.Resolve(p, decide.DefaultConfig())
		if err != nil {
			return nil, err
		}
		out = append(out, sp)
	}
	return out, nil
}
