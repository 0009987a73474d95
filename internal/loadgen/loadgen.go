// Package loadgen drives a Gantry server the way a large fleet does: it
// joins N machines through the real API (hand-minted join token, one
// credential per machine), then sends their heartbeats at a fixed total
// rate, each machine in turn, and measures every heartbeat's latency from
// the moment it was due, so a server that falls behind shows as latency
// instead of as a slower schedule.
package loadgen

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/client"
	"github.com/gantry-dev/gantry/internal/pki"
)

// Config is one load run.
type Config struct {
	// Servers is the server URL, or several, comma-separated (machine i
	// starts on server i mod n).
	Servers string
	// AdminToken applies the load cluster and mints the join token.
	AdminToken string
	Cluster    string
	Machines   int
	// Rate is heartbeats per second, all machines together.
	Rate     float64
	Duration time.Duration
	// Warmup is sent first and not measured.
	Warmup time.Duration
	// Workers bound the heartbeats in flight; JoinWorkers the joins.
	Workers     int
	JoinWorkers int
	Timeout     time.Duration
	// RetryWait is the wait before a join the server rate limited (or
	// could not write: 503) is sent again; JoinRetries bounds the tries
	// after a 503.
	RetryWait   time.Duration
	JoinRetries int
	// HTTP is the client transport (nil: one sized for Workers, trusting
	// CAPEM when set).
	HTTP  *http.Client
	CAPEM []byte
	// Services of ReplicasPerService replicas each (10m CPU, 16Mi) are
	// applied to the load cluster once the machines joined, a hundred
	// at a time, while the warm-up heartbeats run; the warm-up goes on
	// until the servers hold them all. Each hundred may take
	// PlaceTimeout to be applied and held; an apply or a count that
	// fails (a timeout of a busy server) is sent again every
	// PlaceRetryWait meanwhile (an apply of the same file changes
	// nothing the second time).
	Services           int
	ReplicasPerService int
	PlaceTimeout       time.Duration
	PlaceRetryWait     time.Duration
}

// DefaultConfig is 10,000 machines at 2,000 heartbeats/s for 30 s.
func DefaultConfig() Config {
	return Config{Cluster: "load", Machines: 10000, Rate: 2000, Duration: 30 * time.Second, Warmup: 5 * time.Second,
		Workers: 512, JoinWorkers: 16, Timeout: 10 * time.Second, RetryWait: 100 * time.Millisecond, JoinRetries: 30,
		PlaceTimeout: 10 * time.Minute, PlaceRetryWait: time.Second}
}

// Result is what a run measured.
type Result struct {
	Sent, Failed  int
	FirstError    string
	Elapsed       time.Duration
	P50, P90, P99 time.Duration
	Max           time.Duration
	JoinDuration  time.Duration
	// Replicas is how many replicas the servers held when the measured
	// run began, and PlaceDuration how long they took to be made.
	Replicas      int
	PlaceDuration time.Duration
}

// Rate is the heartbeats per second that completed.
func (r Result) Rate() float64 { return float64(r.Sent-r.Failed) / r.Elapsed.Seconds() }

func (r Result) String() string {
	return fmt.Sprintf("%d heartbeats in %s (%.0f/s), %d failed; latency from due: p50 %s p90 %s p99 %s max %s",
		r.Sent, r.Elapsed.Round(time.Millisecond), r.Rate(), r.Failed, ms(r.P50), ms(r.P90), ms(r.P99), ms(r.Max))
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d.Microseconds())/1000) }

type machine struct {
	id  string
	api *client.Client
}

// Run joins the machines and drives their heartbeats.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if cfg.Machines <= 0 || cfg.Rate <= 0 || cfg.Workers <= 0 {
		return Result{}, errors.New("loadgen: machines, rate and workers must be positive")
	}
	httpClient := cfg.HTTP
	if httpClient == nil {
		transport := &http.Transport{MaxIdleConnsPerHost: cfg.Workers, MaxIdleConns: cfg.Workers}
		if cfg.CAPEM != nil {
			tlsCfg, err := pki.PoolClientConfig(cfg.CAPEM)
			if err != nil {
				return Result{}, fmt.Errorf("CA certificate: %w", err)
			}
			transport.TLSClientConfig = tlsCfg
		}
		httpClient = &http.Client{Timeout: cfg.Timeout, Transport: transport}
	}
	start := time.Now()
	machines := &roster{}
	joining, joined := context.WithCancel(ctx)
	alive := make(chan struct{})
	go func() { defer close(alive); keepAlive(joining, cfg, machines) }()
	err := join(ctx, cfg, httpClient, machines)
	joined()
	<-alive
	if err != nil {
		return Result{}, err
	}
	joinDuration := time.Since(start)
	placed := startServices(ctx, cfg, httpClient)
	if err := warmUp(ctx, cfg, machines, placed); err != nil {
		return Result{}, err
	}
	res, err := drive(ctx, cfg, machines, cfg.Duration)
	res.JoinDuration = joinDuration
	if placed != nil {
		p := <-placed
		res.Replicas, res.PlaceDuration = p.replicas, p.took
	}
	return res, err
}

// warmUp drives unmeasured heartbeats for cfg.Warmup, and on, a warm-up
// at a time, until the services are placed (placed is closed).
func warmUp(ctx context.Context, cfg Config, machines *roster, placed chan placement) error {
	for round := 0; ; round++ {
		if cfg.Warmup > 0 {
			if _, err := drive(ctx, cfg, machines, cfg.Warmup); err != nil {
				return err
			}
		}
		if placed == nil {
			return nil
		}
		select {
		case p := <-placed:
			placed <- p // Run reads it again
			return p.err
		default:
			if cfg.Warmup <= 0 {
				cfg.Warmup = 5 * time.Second
			}
		}
	}
}

// groupSize is how many machines of the load each capacity group holds
// (a group holds at most 10,000).
const groupSize = 10000

// clusterSpec is the load cluster: enough groups of groupSize for the
// machines.
func clusterSpec(name string, machines int) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "kind: Cluster\nmetadata: {name: %s}\nspec:\n  containerCidr: 10.0.0.0/8\n  capacityGroups:\n", name)
	for g := 0; g*groupSize < max(machines, 1); g++ {
		fmt.Fprintf(&b, "    - {groupId: %s, instanceType: local.small, minSize: 0, maxSize: %d}\n", loadGroup(g*groupSize), groupSize)
	}
	return []byte(b.String())
}

// loadGroup is the group machine i joins.
func loadGroup(i int) string { return fmt.Sprintf("load-%d", i/groupSize) }

// join joins the machines, each added to machines once it joined.
func join(ctx context.Context, cfg Config, httpClient *http.Client, machines *roster) error {
	admin := client.New(cfg.Servers, cfg.AdminToken, httpClient)
	if _, err := admin.Apply(ctx, clusterSpec(cfg.Cluster, cfg.Machines)); err != nil {
		return fmt.Errorf("apply the load cluster: %w", err)
	}
	tokens := map[string]string{}
	for i := 0; i < cfg.Machines; i += groupSize {
		tok, err := admin.CreateJoinToken(ctx, api.JoinTokenRequest{Cluster: cfg.Cluster, Group: loadGroup(i), TTL: "24h", Reusable: -1})
		if err != nil {
			return fmt.Errorf("mint a join token: %w", err)
		}
		tokens[loadGroup(i)] = tok.Token
	}
	servers := client.SplitURLs(cfg.Servers)
	next := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for range max(cfg.JoinWorkers, 1) {
		wg.Go(func() {
			for i := range next {
				id := fmt.Sprintf("%s-%05d", cfg.Cluster, i)
				c := client.New(servers[i%len(servers)], "", httpClient)
				req := api.JoinRequest{Token: tokens[loadGroup(i)], Cluster: cfg.Cluster, MachineID: id,
					Inventory: api.Inventory{Capacity: api.Resources{MilliCPU: 2000, MemoryBytes: 4 << 30}, Runtimes: []string{"process"}}}
				resp, err := c.Join(ctx, req)
				// Joins from one address are rate limited, as an agent's
				// are; a store that lost a race too often answers 503, and
				// an agent joins again after a while. A join whose answer
				// did not come in time may have joined: the agent joins
				// again under a new name (the first, if it joined, never
				// heartbeats and is found lost).
				for retries := 0; (client.IsStatus(err, http.StatusTooManyRequests) ||
					(client.IsStatus(err, http.StatusServiceUnavailable) || timedOut(err)) && retries < cfg.JoinRetries) && ctx.Err() == nil; retries++ {
					if timedOut(err) {
						id = fmt.Sprintf("%s-%05d-%d", cfg.Cluster, i, retries+1)
						req.MachineID = id
					}
					time.Sleep(cfg.RetryWait)
					resp, err = c.Join(ctx, req)
				}
				if err != nil && !client.IsStatus(err, http.StatusConflict) {
					mu.Lock()
					firstErr = cmpErr(firstErr, fmt.Errorf("join %s: %w", id, err))
					mu.Unlock()
					continue
				}
				if err == nil {
					machines.add(machine{id: id, api: c.WithToken(resp.Credential)})
				}
			}
		})
	}
	for i := range cfg.Machines {
		select {
		case next <- i:
		case <-ctx.Done():
		}
	}
	close(next)
	wg.Wait()
	return firstErr
}

// roster is the machines that joined so far, heartbeating in turn: a
// drive goes on from the machine after the last one's, so each machine
// beats once per len/Rate seconds however the run is cut into drives
// (warm-ups, the measured run).
type roster struct {
	mu       sync.Mutex
	machines []machine
	next     int
}

func (r *roster) add(m machine) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.machines = append(r.machines, m)
}

func (r *roster) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.machines)
}

// turn is the machine whose heartbeat is next.
func (r *roster) turn() machine {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.machines[r.next%len(r.machines)]
	r.next = (r.next + 1) % len(r.machines)
	return m
}

// keepAlive heartbeats the machines that joined, at most cfg.Rate and
// each at most once a second, until ctx ends: the first of 50,000
// machines join minutes before the last, and a machine that does not
// heartbeat meanwhile is found unreachable, then lost. Not measured.
func keepAlive(ctx context.Context, cfg Config, machines *roster) {
	for ctx.Err() == nil {
		n := machines.len()
		if n == 0 {
			select {
			case <-ctx.Done():
			case <-time.After(cfg.RetryWait):
			}
			continue
		}
		window := cfg
		window.Rate = min(cfg.Rate, float64(n))
		_, _ = drive(ctx, window, machines, time.Second)
	}
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

type beat struct {
	m   machine
	due time.Time
}

// drive sends heartbeats at cfg.Rate for d, machine after machine.
func drive(ctx context.Context, cfg Config, machines *roster, d time.Duration) (Result, error) {
	if machines.len() == 0 {
		return Result{}, errors.New("loadgen: no machine joined")
	}
	total := int(cfg.Rate * d.Seconds())
	queue := make(chan beat, total)
	latencies := make([]time.Duration, 0, total)
	var mu sync.Mutex
	failed := 0
	firstErr := ""
	var wg sync.WaitGroup
	for range cfg.Workers {
		wg.Go(func() {
			for b := range queue {
				_, err := b.m.api.Heartbeat(ctx, b.m.id, api.HeartbeatRequest{})
				lat := time.Since(b.due)
				mu.Lock()
				latencies = append(latencies, lat)
				if err != nil {
					failed++
					if firstErr == "" {
						firstErr = err.Error()
					}
				}
				mu.Unlock()
			}
		})
	}
	start := time.Now()
	period := time.Duration(float64(time.Second) / cfg.Rate)
	for k := range total {
		due := start.Add(time.Duration(k) * period)
		if wait := time.Until(due); wait > 0 {
			select {
			case <-time.After(wait):
			case <-ctx.Done():
			}
		}
		if ctx.Err() != nil {
			break
		}
		queue <- beat{m: machines.turn(), due: due}
	}
	close(queue)
	wg.Wait()
	res := Result{Sent: len(latencies), Failed: failed, FirstError: firstErr, Elapsed: time.Since(start)}
	slices.Sort(latencies)
	if n := len(latencies); n > 0 {
		res.P50, res.P90, res.P99, res.Max = latencies[n*50/100], latencies[n*90/100], latencies[n*99/100], latencies[n-1]
	}
	return res, ctx.Err()
}

// timedOut: a request's answer did not come within the client's timeout.
func timedOut(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
