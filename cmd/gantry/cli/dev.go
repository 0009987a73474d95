package cli

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/client"
	"github.com/gantry-dev/gantry/endpoints"
	"github.com/gantry-dev/gantry/provider/clouds"
	"github.com/gantry-dev/gantry/server"
	"github.com/gantry-dev/gantry/spec"
	"github.com/gantry-dev/gantry/target/kube"
	"github.com/spf13/cobra"
)

// devConfig tunes the server for one host and a person watching: short
// loops and heartbeats, and machines that end with the process.
func devConfig(dataDir string) server.Config {
	cfg := server.DefaultConfig(dataDir)
	cfg.TLS.Disabled = true // one host, on loopback
	cfg.Controller.Interval = 500 * time.Millisecond
	cfg.Controller.Decide.HeartbeatInterval = time.Second
	cfg.Controller.Decide.LaunchBackoff = 2 * time.Second
	cfg.Controller.Decide.Planner.EmptyMachineTTL = 30 * time.Second
	cfg.Controller.Decide.JoinTimeout = time.Minute
	cfg.Controller.Decide.RescheduleGrace = 3 * time.Second
	cfg.LocalStopGrace = 5 * time.Second
	cfg.LocalExitWithServer = true
	cfg.Docker.StopGrace = 5 * time.Second
	return cfg
}

func newDevCmd(g *globals) *cobra.Command {
	cfg := devConfig("")
	var cloudCfg clouds.Config
	var file, provider, workloadImage string
	var progressEvery time.Duration
	cmd := &cobra.Command{
		Use:   "dev -f FILE",
		Short: "Run everything on this host: server, local machines, your spec",
		Long: "Starts a server with its state in --data-dir, whose machines are agent processes on this host, " +
			"applies the spec and shows machines and replicas coming up. Ctrl-C terminates every machine it started; " +
			"the state stays, so the next run starts from it.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if file == "" {
				return fmt.Errorf("-f FILE is required")
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
			if provider != "" {
				if data, err = withProvider(docs, provider); err != nil {
					return err
				}
				if docs, err = spec.Parse(file+" (with --provider "+provider+")", data, providers); err != nil {
					return err
				}
			}
			if err := checkProviders(docs); err != nil {
				return err
			}
			if usesProvider(docs, "docker") {
				if err := prepareDocker(cmd.Context(), g, &cfg, workloadImage); err != nil {
					return err
				}
			}
			cfg.DataDir, cfg.Store.SQLite = g.dataDir, server.DefaultConfig(g.dataDir).Store.SQLite
			cfg.Providers = clouds.New(cloudCfg).Entries()
			cfg.Kubernetes = kube.Factory(kube.DefaultConfig())
			return runDev(cmd.Context(), g, cfg, data, docs, progressEvery)
		},
	}
	cmd.Flags().StringVarP(&file, "filename", "f", "", "spec file (YAML or JSON)")
	cmd.Flags().StringVar(&provider, "provider", "", "run every cluster of the spec on this provider: local (agent processes) or docker (agent containers)")
	cmd.Flags().DurationVar(&progressEvery, "progress-interval", 500*time.Millisecond, "how long progress waits before it opens a broken watch again")
	cmd.Flags().StringVar(&workloadImage, "workload-image", devImage, "docker provider: the image the examples' replicas run, built from this binary when missing or stale")
	serverFlags(cmd.Flags(), &cfg, &cloudCfg)
	return cmd
}

func runDev(ctx context.Context, g *globals, cfg server.Config, data []byte, docs []spec.Document, every time.Duration) error {
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return err
	}
	logPath := filepath.Join(cfg.DataDir, "server.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("server log: %w", err)
	}
	defer logFile.Close()
	log, _ := newLogger(logFile, "text", "info")
	srv, err := server.New(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer srv.Close()
	runCtx, stopServer := context.WithCancel(context.Background())
	defer stopServer()
	served := make(chan error, 1)
	go func() { served <- srv.Run(runCtx) }()
	fmt.Fprintf(g.out, "gantry dev: server %s, state in %s (log: %s)\n", srv.URL(), cfg.DataDir, logPath)
	fmt.Fprintln(g.out, plainHTTPNote(srv.URL()))
	fmt.Fprintf(g.out, "gantry dev: dashboard %s/ui/ (sign in with the admin token in %s)\n", srv.URL(), srv.AdminTokenPath())

	select {
	case <-srv.Ready():
	case <-ctx.Done():
	}
	c := client.New(srv.URL(), srv.AdminToken(), nil)
	res, err := c.Apply(ctx, data)
	if err != nil {
		stopServer()
		<-served
		return err
	}
	printApplyResult(g.out, res)
	fmt.Fprintln(g.out, "Waiting for machines and replicas (Ctrl-C stops everything)...")
	watchProgress(ctx, g.out, c, servicesOf(docs), every)

	fmt.Fprintln(g.out, "\nStopping: terminating every machine at once...")
	// The control loop stops first, or it would replace what we terminate.
	start := time.Now()
	stopServer()
	err = <-served
	// All at once, each bounded by the local stop grace.
	stopped := 0
	if termErr := srv.TerminateAll(context.Background(), "gantry dev stopped", func(m *api.Machine) {
		stopped++
		fmt.Fprintf(g.out, "  stopping machine %s (%s)\n", m.ID, m.InstanceType)
	}); termErr != nil {
		fmt.Fprintln(g.errOut, "warning: terminate machines:", termErr)
	}
	fmt.Fprintf(g.out, "Stopped %d machine(s) and their replicas in %s. State kept in %s (delete it to start clean).\n",
		stopped, time.Since(start).Round(100*time.Millisecond), cfg.DataDir)
	return err
}

func servicesOf(docs []spec.Document) map[string]bool {
	out := map[string]bool{}
	for _, d := range docs {
		if d.Service != nil {
			out[d.Name()] = true
		}
	}
	return out
}

// watchProgress prints each change of machine and replica state until ctx
// ends, and the table of URLs each time all replicas become ready. It
// reads them again when the change feed says they changed (every is the
// wait before a broken watch is opened again).
func watchProgress(ctx context.Context, w io.Writer, c *client.Client, services map[string]bool, every time.Duration) {
	machineState := map[string]string{}
	replicaState := map[string]string{}
	wasReady := false
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	changed := c.Changes(ctx, client.WatchOptions{Reconnect: every}, "/v1/machines", "/v1/replicas")
	for {
		machines, errM := c.ListMachines(ctx, "")
		replicas, errR := c.ListReplicas(ctx, "")
		if errM == nil && errR == nil {
			reportMachines(w, machines, machineState)
			mine := filterReplicas(replicas, services)
			reportReplicas(w, mine, replicaState)
			ready := allReady(mine, services)
			if ready && !wasReady {
				printReady(w, mine, machines)
				printExposed(ctx, w, c, services, machines)
				fmt.Fprintln(w, anotherTerminal(cliCommand(os.Executable, exec.LookPath)))
			}
			wasReady = ready
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
}

func reportMachines(w io.Writer, machines []api.Machine, seen map[string]string) {
	for _, m := range machines {
		state := string(m.JoinState) + "/" + string(m.FleetState)
		if prev, ok := seen[m.ID]; !ok || prev != state {
			fmt.Fprintf(w, "  machine %-28s %-9s %-22s %s\n", m.ID, m.InstanceType, state, m.Reason)
			seen[m.ID] = state
		}
	}
}

func filterReplicas(replicas []api.Replica, services map[string]bool) []api.Replica {
	var out []api.Replica
	for _, r := range replicas {
		if services[r.Service] {
			out = append(out, r)
		}
	}
	return out
}

func reportReplicas(w io.Writer, replicas []api.Replica, seen map[string]string) {
	for _, r := range replicas {
		where := cmp.Or(r.Machine, r.Node) // a Pod's node on a Kubernetes cluster
		state := string(r.State) + "/" + string(r.Health) + "@" + where
		if prev, ok := seen[r.ID]; ok && prev == state {
			continue
		}
		seen[r.ID] = state
		if where != "" {
			where = "on " + where
		}
		detail := r.Reason
		if u := r.URL(); u != "" && r.State == api.ReplicaRunning {
			detail = u
		}
		fmt.Fprintf(w, "  replica %-28s %-9s %-30s %s\n", r.ID, r.State, where, detail)
	}
}

// allReady: every replica of the spec's services runs and, where it has a
// health check, passes it.
func allReady(replicas []api.Replica, services map[string]bool) bool {
	if len(replicas) == 0 {
		return false
	}
	for _, r := range replicas {
		if r.State != api.ReplicaRunning || r.Health == api.HealthUnhealthy {
			return false
		}
	}
	return true
}

func printReady(w io.Writer, replicas []api.Replica, machines []api.Machine) {
	sort.Slice(replicas, func(i, j int) bool { return replicas[i].ID < replicas[j].ID })
	fmt.Fprintln(w, "\nAll replicas are running:")
	t := &table{header: []string{"REPLICA", "MACHINE", "HEALTH", "URL"}}
	for _, r := range replicas {
		t.add(r.ID, orDash(cmp.Or(r.Machine, r.Node)), orDash(string(r.Health)), orDash(r.URL()))
	}
	_ = t.print(w, false)
	fmt.Fprintln(w)
	printNames(w, replicas, machines)
}

// printExposed tells where each exposed port of the spec's services is
// served: the first address of a machine of its cluster that serves it.
func printExposed(ctx context.Context, w io.Writer, c *client.Client, services map[string]bool, machines []api.Machine) {
	all, err := c.ListServices(ctx)
	if err != nil {
		return
	}
	clusters := map[string]*api.Cluster{}
	for _, svc := range all {
		if !services[svc.Metadata.Name] || len(svc.Spec.Expose) == 0 {
			continue
		}
		if _, ok := clusters[svc.Spec.Cluster]; !ok {
			clusters[svc.Spec.Cluster], _ = c.GetCluster(ctx, svc.Spec.Cluster)
		}
		host := edgeAddress(clusters[svc.Spec.Cluster], machines)
		for _, e := range svc.Spec.Expose {
			scheme := map[string]string{api.ExposeHTTP: "http://", api.ExposeTCP: "tcp://"}[e.Protocol]
			fmt.Fprintf(w, "Exposed %s (port %s) at %s%s, through HAProxy on the cluster's edge machines\n",
				svc.Metadata.Name, e.TargetPort, scheme, net.JoinHostPort(host, strconv.Itoa(e.Port)))
		}
		if _, err := exec.LookPath("haproxy"); err != nil {
			if _, err := os.Stat("/usr/sbin/haproxy"); err != nil {
				fmt.Fprintln(w, "  HAProxy is not installed: exposed ports are not served until it is (Debian: apt-get install haproxy)")
			}
		}
	}
}

// edgeAddress is the address of a live machine of cluster c that serves
// its exposed ports (127.0.0.1 when none is known yet): its own address in
// an overlay (a docker machine's container, where its HAProxy listens),
// else the address its agent reports.
func edgeAddress(c *api.Cluster, machines []api.Machine) string {
	if c == nil {
		return "127.0.0.1"
	}
	names := api.ClusterNames{EdgeGroups: endpoints.EdgeGroups(c)}
	for _, m := range machines {
		if m.Cluster != c.Metadata.Name || !m.Live() || !names.Serves(m.Group) {
			continue
		}
		if host, _, err := net.SplitHostPort(m.MeshEndpoint); err == nil && host != "" {
			return host
		}
		if len(m.Addresses) > 0 {
			return m.Addresses[0]
		}
	}
	return "127.0.0.1"
}

// printNames tells where each service's name is answered: any machine's
// agent of its cluster answers it (replicas find theirs in GANTRY_DNS).
func printNames(w io.Writer, replicas []api.Replica, machines []api.Machine) {
	resolver := map[string]string{}
	for _, m := range machines {
		if m.DNSAddress != "" && m.Live() && resolver[m.Cluster] == "" {
			resolver[m.Cluster] = m.DNSAddress
		}
	}
	named := map[string]bool{}
	for _, r := range replicas {
		dns := resolver[r.Cluster]
		if dns == "" || named[r.Service] {
			continue
		}
		named[r.Service] = true
		host, port, _ := net.SplitHostPort(dns)
		fmt.Fprintf(w, "Name %s answered at %s (dig @%s -p %s %s SRV); replicas read the resolver from $GANTRY_DNS\n",
			api.ServiceName(r.Service, r.Cluster), dns, host, port, api.ServiceName(r.Service, r.Cluster))
	}
}

// plainHTTPNote says that dev serves plain HTTP, and warns when that is
// not on loopback.
func plainHTTPNote(url string) string {
	u, err := neturl.Parse(url)
	if ip := net.ParseIP(u.Hostname()); err == nil && (u.Hostname() == "localhost" || ip != nil && ip.IsLoopback()) {
		return "gantry dev: plain HTTP on loopback, for this host only (`gantry server` serves HTTPS)"
	}
	return "gantry dev: WARNING: plain HTTP on " + u.Host + ", reachable beyond this host; use `gantry server` (HTTPS) for that"
}

// cliCommand is how the user runs this very gantry from a shell: "gantry"
// when that is it on PATH, its path otherwise, and "" when it is a
// temporary build of `go run` (gone when dev ends).
func cliCommand(executable func() (string, error), lookPath func(string) (string, error)) string {
	exe, err := executable()
	if err != nil {
		return ""
	}
	if onPath, err := lookPath("gantry"); err == nil && sameFile(onPath, exe) {
		return "gantry"
	}
	if strings.Contains(exe, string(filepath.Separator)+"go-build") {
		return ""
	}
	return exe
}

func sameFile(a, b string) bool {
	ia, errA := os.Stat(a)
	ib, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(ia, ib)
}

// anotherTerminal is the hint of what to run beside dev.
func anotherTerminal(gantry string) string {
	if gantry == "" {
		return "In another terminal, in this directory: go build -o gantry ./cmd/gantry (once; `go run` built a temporary binary), then\n" +
			"  ./gantry get machines | ./gantry get replicas -o wide | ./gantry get events"
	}
	return fmt.Sprintf("In another terminal, in this directory: %[1]s get machines | %[1]s get replicas -o wide | %[1]s get events", gantry)
}
