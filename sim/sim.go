// Package sim replays a trace of demand through the production control
// loop: the real decide, pass after pass, on a simulated clock, with the
// play-back of its plans (decide/playback) as the act step and a model of
// the world (World) answering its provider calls and running its
// replicas. A pass runs only when something changed or a deadline the
// real code compared would pass (event-driven), so a month of a fleet
// takes seconds. Each policy (a set of the server's decision settings)
// is a run of its own over the same trace and seed; a run is the same
// every time.
package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/decide"
	"github.com/gantry-dev/gantry/decide/playback"
	"github.com/gantry-dev/gantry/sim/trace"
)

// Setup is what every run of a simulation shares.
type Setup struct {
	Clusters []*api.Cluster
	Services []*api.Service
	// Catalogs are each cluster's provider key and instance types, by
	// cluster; Providers describe the providers by name.
	Catalogs  map[string]decide.ClusterProvider
	Providers map[string]decide.ProviderInfo
	Trace     trace.Trace
	World     World
	// WorldName says which world it is, for the report ("cloud", "local",
	// or a file's name over one of them; "": not said).
	WorldName string
	// Seed draws the world's latencies, capacity errors and interruptions.
	Seed uint64
	// End is when the run stops (zero: at the trace's last row).
	End time.Time
	// SpotPrices change spot prices over time, in time order (none: the
	// catalog's all along).
	SpotPrices []trace.PriceChange
	// LabelPasses labels each pass's CPU samples with what the instant
	// was for ("woke": trace, world, heard, deadline…), the pass's
	// place in it ("pass": 1, 2, 3+) and the trace's day ("day": day1,
	// day2…), for a profile of where a run's time goes (go tool pprof
	// -tags, -tagfocus). It changes nothing the run decides.
	LabelPasses bool
}

// Policy is one run's decision settings.
type Policy struct {
	Name string
	// Settings are the policy's settings as written, for the report;
	// Over is what they change ("": Gantry's defaults).
	Settings []string
	Over     string
	Config   decide.Config
	// Group changes every capacity group of the spec (capacity type, warm
	// pool); nil: as the spec says.
	Group func(*api.CapacityGroup)
}

// Check refuses a setup a run cannot simulate, naming what.
func (s Setup) Check() error {
	if len(s.Trace.Rows) == 0 {
		return errors.New("the trace has no rows")
	}
	if err := s.World.Check(); err != nil {
		return fmt.Errorf("world: %w", err)
	}
	var bad []error
	for _, c := range s.Clusters {
		if c.Kubernetes() {
			bad = append(bad, fmt.Errorf("cluster %s: a Kubernetes cluster's capacity is not Gantry's to simulate", c.Metadata.Name))
			continue
		}
		cp := s.Catalogs[c.Metadata.Name]
		if cp.Err != "" || len(cp.Catalog) == 0 {
			bad = append(bad, fmt.Errorf("cluster %s: no instance types to price it with (%s): pass a catalog", c.Metadata.Name, cp.Err))
		}
		if !s.Providers[c.Spec.Provider.Name].Provisions {
			bad = append(bad, fmt.Errorf("cluster %s: provider %s launches no machines", c.Metadata.Name, c.Spec.Provider.Name))
		}
	}
	if !s.End.IsZero() && !s.End.After(s.Trace.Start()) {
		bad = append(bad, fmt.Errorf("the end %s is not after the trace's start %s", s.End.Format(time.RFC3339), s.Trace.Start().Format(time.RFC3339)))
	}
	return errors.Join(bad...)
}

// Simulate runs one policy over the setup's trace.
func Simulate(s Setup, p Policy) (Result, error) {
	return simulate(context.Background(), s, p, false)
}

// SimulateContext is Simulate, given up when ctx ends (a server's bound
// on the time a simulation may take).
func SimulateContext(ctx context.Context, s Setup, p Policy) (Result, error) {
	return simulate(ctx, s, p, false)
}

// simulate is Simulate; verify decides every pass afresh too (tests).
func simulate(ctx context.Context, s Setup, p Policy, verify bool) (Result, error) {
	if err := s.Check(); err != nil {
		return Result{}, err
	}
	r, err := newRun(s, p)
	if err != nil {
		return Result{}, err
	}
	r.verify = verify
	if err := r.loop(ctx); err != nil {
		return Result{}, fmt.Errorf("policy %s at %s: %w", p.Name, r.w.Now.Format(time.RFC3339), err)
	}
	return r.result(), nil
}

// newRun sets a run up at the trace's start: the spec's clusters (with
// the policy's group settings) and services, no machine yet.
func newRun(s Setup, p Policy) (*run, error) {
	var clusters []*api.Cluster
	var services []*api.Service
	if err := deepCopy(s.Clusters, &clusters); err != nil {
		return nil, err
	}
	if err := deepCopy(s.Services, &services); err != nil {
		return nil, err
	}
	catalogs := s.Catalogs
	if len(s.SpotPrices) > 0 { // the run changes its prices
		catalogs = cloneCatalogs(s.Catalogs)
	}
	snap := &decide.Snapshot{Clusters: map[string]*api.Cluster{}, Services: services, Catalogs: catalogs, Providers: s.Providers,
		Instances: map[string]decide.InstanceObservation{}, Inventories: map[string]decide.Inventory{}, ListedAt: map[string]time.Time{},
		InFlight: map[string]bool{}}
	for _, c := range clusters {
		if p.Group != nil {
			for i := range c.Spec.CapacityGroups {
				p.Group(&c.Spec.CapacityGroups[i])
			}
		}
		snap.Clusters[c.Metadata.Name] = c
	}
	start, end := s.Trace.Start(), s.End
	if end.IsZero() {
		end = s.Trace.End()
	}
	if !end.After(start) {
		end = start.Add(time.Minute)
	}
	snap.LivenessSince = start
	cfg := p.Config
	cfg.Planner.SkipBound = true // the run's own bound is planned from scratch (bound.go)
	r := &run{setup: s, policy: p, cfg: cfg, mem: decide.NewMemory(), agenda: &agenda{}, heard: &agenda{}, replacing: map[string]bool{}, ledger: newLedger(start, end), end: end,
		changes: newChanges(), tally: newTally(), made: appended{len(snap.Replicas), len(snap.Machines)}, woke: wokeStart}
	r.w = playback.World{Snap: snap, Now: start}
	r.w.IndexReplicas()
	r.w.IndexMachines()
	r.w.Ended = func() []string { return slices.Collect(maps.Keys(r.changes.ending)) }
	r.cloud = &cloud{world: s.World, rng: rand.New(rand.NewPCG(s.Seed, 0x5eed)), w: &r.w, mem: &r.mem, changes: r.changes, agenda: r.agenda, ledger: r.ledger,
		instances: map[string]*instance{}, silent: map[string]bool{}, beat: new(time.Time), unbeaten: map[string]bool{}, beatAll: true}
	r.w.Provider = r.cloud
	r.w.OnOrOff = func(machine string) []*api.Replica { return r.tally.onOrOff(&r.w, r.changes.c, machine) }
	r.bound = newBounder(s.World.BoundEvery, start)
	r.res.Disruptions.Terminations = map[string]int{}
	return r, nil
}

func deepCopy[T any](in T, out *T) error {
	data, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("copying the spec: %w", err)
	}
	return json.Unmarshal(data, out)
}

// SimulateAll runs the policies side by side, as many at once as there
// are CPUs (each run is its own, and the same whichever runs first);
// done, when set, hears of each run as it ends. The results are in the
// policies' order.
func SimulateAll(ctx context.Context, s Setup, policies []Policy, done func(p Policy, res Result, took time.Duration)) ([]Result, error) {
	results := make([]Result, len(policies))
	var eg errgroup.Group
	var mu sync.Mutex // over done
	eg.SetLimit(runtime.GOMAXPROCS(0))
	for i, p := range policies {
		eg.Go(func() error {
			began := time.Now()
			res, err := SimulateContext(ctx, s, p)
			if err != nil {
				return err
			}
			if done != nil {
				mu.Lock()
				done(p, res, time.Since(began))
				mu.Unlock()
			}
			results[i] = res
			return nil
		})
	}
	return results, eg.Wait()
}
