// Command gantry-loadgen joins machines to a Gantry server through its API
// and drives their heartbeats at a fixed rate, reporting latency from when
// each heartbeat was due (see BENCHMARKS.md).
//
//	go run ./cmd/gantry-loadgen --server URL[,URL…] --admin-token-file DIR/admin-token --machines 10000 --rate 2000
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"

	"github.com/gantry-dev/gantry/internal/loadgen"
)

func main() {
	cfg := loadgen.DefaultConfig()
	tokenFile, caFile := "", ""
	flag.StringVar(&cfg.Servers, "server", "http://127.0.0.1:7400", "server URL, or several comma-separated (machines are spread over them)")
	flag.StringVar(&tokenFile, "admin-token-file", "", "file holding the admin token (default: $GANTRY_ADMIN_TOKEN)")
	flag.StringVar(&caFile, "ca-cert", "", "CA certificate of an HTTPS server (<data-dir>/ca.crt)")
	flag.StringVar(&cfg.Cluster, "cluster", cfg.Cluster, "cluster the machines join (created if missing)")
	flag.IntVar(&cfg.Machines, "machines", cfg.Machines, "machines to join")
	flag.Float64Var(&cfg.Rate, "rate", cfg.Rate, "heartbeats per second, all machines together")
	flag.DurationVar(&cfg.Duration, "duration", cfg.Duration, "measured run")
	flag.DurationVar(&cfg.Warmup, "warmup", cfg.Warmup, "unmeasured run first")
	flag.IntVar(&cfg.Workers, "workers", cfg.Workers, "heartbeats in flight at most")
	flag.IntVar(&cfg.JoinWorkers, "join-workers", cfg.JoinWorkers, "joins in flight at most")
	flag.IntVar(&cfg.Services, "services", cfg.Services, "services applied to the cluster after the joins (their replicas are placed on the machines)")
	flag.IntVar(&cfg.ReplicasPerService, "replicas-per-service", 10, "replicas of each service")
	flag.DurationVar(&cfg.PlaceTimeout, "place-timeout", cfg.PlaceTimeout, "how long the servers may take to take and hold each hundred services (their apply and their replicas)")
	flag.DurationVar(&cfg.PlaceRetryWait, "place-retry-wait", cfg.PlaceRetryWait, "wait before an apply or a count of replicas that failed is sent again")
	flag.Parse()
	cfg.AdminToken = os.Getenv("GANTRY_ADMIN_TOKEN")
	if tokenFile != "" {
		data, err := os.ReadFile(tokenFile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "gantry-loadgen:", err)
			os.Exit(1)
		}
		cfg.AdminToken = strings.TrimSpace(string(data))
	}
	if caFile != "" {
		data, err := os.ReadFile(caFile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "gantry-loadgen:", err)
			os.Exit(1)
		}
		cfg.CAPEM = data
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	res, err := loadgen.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gantry-loadgen:", err)
		os.Exit(1)
	}
	fmt.Printf("%d machines joined in %s\n", cfg.Machines, res.JoinDuration.Round(1e6))
	if cfg.Services > 0 {
		fmt.Printf("%d replicas of %d services held after %s\n", res.Replicas, cfg.Services, res.PlaceDuration.Round(1e6))
	}
	fmt.Println(res)
	if res.FirstError != "" {
		fmt.Printf("first error: %s\n", res.FirstError)
	}
}
