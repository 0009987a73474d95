package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/decide"
	"github.com/gantry-dev/gantry/decide/decidetest"
	"github.com/gantry-dev/gantry/sim/trace"
)

// testSetup is a cluster of the harness's provider and catalog whose one
// group may use any type and capacity type, and the services named, each
// of 500m and 1Gi replicas, with the trace given as CSV rows.
func testSetup(t testing.TB, rows string, services ...string) Setup {
	t.Helper()
	c := &api.Cluster{Kind: api.KindCluster, Metadata: api.ObjectMeta{Name: "prod", Generation: 1}, Spec: api.ClusterSpec{
		Provider:       api.ProviderSpec{Name: decidetest.Provider},
		CapacityGroups: []api.CapacityGroup{{GroupID: "general", MinSize: 0, MaxSize: 500, CapacityType: api.CapacityAny}},
		ContainerCIDR:  "10.0.0.0/8", Rollout: api.RolloutPolicy{MaxSurge: 1}}}
	known := map[string]bool{}
	var svcs []*api.Service
	for _, name := range services {
		zero := 0
		svcs = append(svcs, &api.Service{Kind: api.KindService, Metadata: api.ObjectMeta{Name: name, Generation: 1}, Spec: api.ServiceSpec{
			Cluster: "prod", Command: []string{"serve"}, Replicas: &zero, Resources: api.ServiceResources{CPU: "500m", Memory: "1Gi"},
			Isolation: api.IsolationAny}})
		known[name] = true
	}
	tr, err := trace.ReadCSV(strings.NewReader("time,service,replicas\n"+rows), known)
	if err != nil {
		t.Fatal(err)
	}
	return Setup{Clusters: []*api.Cluster{c}, Services: svcs, Trace: tr, World: DefaultWorld(), Seed: 1,
		Catalogs:  map[string]decide.ClusterProvider{"prod": {Key: decidetest.Provider, Catalog: decidetest.Catalog()}},
		Providers: map[string]decide.ProviderInfo{decidetest.Provider: {Provisions: true, CanStop: true, Runtimes: []string{"process"}}}}
}

func defaultPolicy() Policy { return Policy{Name: "default", Config: decide.DefaultConfig()} }

// A burst of demand: machines come for it, after the world's latencies,
// and go again once it is over; the cost is what they ran for.
func TestABurstIsServedAndItsMachinesGo(t *testing.T) {
	s := testSetup(t, `2026-01-01T00:00:00Z,web,4
2026-01-01T01:00:00Z,web,40
2026-01-01T03:00:00Z,web,4
2026-01-01T06:00:00Z,web,4
`, "web")
	res, err := simulate(context.Background(), s, defaultPolicy(), true)
	if err != nil {
		t.Fatal(err)
	}
	if res.Pending.Count < 40 {
		t.Errorf("pending episodes %d, want at least the 40 replicas made", res.Pending.Count)
	}
	if res.Pending.Max > 5*time.Minute {
		t.Errorf("a replica waited %s", res.Pending.Max)
	}
	if res.Cost <= 0 || res.Bound <= 0 || res.Cost < res.Bound {
		t.Errorf("cost %.4f, bound %.4f", res.Cost, res.Bound)
	}
	if res.Disruptions.Launches < 2 || res.Disruptions.Terminations[decide.CauseDrained] == 0 {
		t.Errorf("launches %d, terminations %v: want machines to come for the burst and go after it", res.Disruptions.Launches, res.Disruptions.Terminations)
	}
	last := res.Series[len(res.Series)-1]
	if last.Pending != 0 || last.Machines > 2 {
		t.Errorf("at the end %.1f replicas wait on %.1f machines, want none waiting on at most 2 (4 replicas of 500m)", last.Pending, last.Machines)
	}
	peak := 0.0
	for _, p := range res.Series {
		peak = max(peak, p.Machines)
	}
	if peak < 5 {
		t.Errorf("at most %.1f machines ran for 40 replicas of 500m on 4-CPU machines", peak)
	}
}

// Machines come and go and come again: no two whose instances run share
// an address (simulate's check after every plan), however many went
// before.
func TestNoTwoRunningInstancesShareAnAddress(t *testing.T) {
	s := testSetup(t, `2026-01-01T00:00:00Z,web,4
2026-01-01T01:00:00Z,web,60
2026-01-01T02:00:00Z,web,10
2026-01-01T03:00:00Z,web,60
2026-01-01T04:00:00Z,web,10
2026-01-01T05:00:00Z,web,60
2026-01-01T06:00:00Z,web,10
`, "web")
	res, err := simulate(context.Background(), s, defaultPolicy(), true)
	if err != nil {
		t.Fatal(err)
	}
	if res.Disruptions.Terminations[decide.CauseDrained] == 0 || res.Disruptions.Launches < 20 {
		t.Fatalf("launches %d, terminations %v: want machines to come and go, and come again", res.Disruptions.Launches, res.Disruptions.Terminations)
	}
}

// A GPU service's replicas run on machines of a GPU type: the machine
// launched for them is waited for, not launched again each pass until it
// joins, and the agents report their type's GPU devices as they join (the
// world joined them without, and the replicas waited on 20 machines).
func TestGPUReplicasRunOnTheMachinesLaunchedForThem(t *testing.T) {
	res := trainOnGPUs(t, 2, "a100")
	if res.Disruptions.Launches != 1 || res.Pending.Max > 5*time.Minute {
		t.Errorf("%d machines launched for two replicas of one GPU each on a type of two; the longest wait %s", res.Disruptions.Launches, res.Pending.Max)
	}
	for _, th := range res.MachineHours {
		if th.InstanceType != "gpu" {
			t.Errorf("a GPU replica's machine of type %s", th.InstanceType)
		}
	}
}

// A machine replaced by a cheaper one counts as replaced: it is drained
// by a later pass than the one that launched its successor, once the
// successor joined (it counted as consolidated, and no machine was ever
// reported replaced).
func TestAReplacedMachineCountsAsReplaced(t *testing.T) {
	s := testSetup(t, `2026-01-01T00:00:00Z,web,12
2026-01-01T01:00:00Z,web,2
2026-01-01T05:00:00Z,web,2
`, "web")
	s.Services[0].Spec.Resources.CPU, s.Services[0].Spec.Resources.Memory = "250m", "256Mi"
	res, err := simulate(context.Background(), s, defaultPolicy(), true)
	if err != nil {
		t.Fatal(err)
	}
	d := res.Disruptions
	if d.MachinesReplaced != 1 || d.MachinesConsolidated != 0 {
		t.Errorf("the large machine of 12 replicas, left with 2, goes for a small one: replaced %d, consolidated %d (%+v)",
			d.MachinesReplaced, d.MachinesConsolidated, res.MachineHours)
	}
}

// The same inputs and seed give the same results, to the last digit,
// whether or not the passes are labelled for a profile; another seed
// draws another world.
func TestARunIsTheSameEveryTime(t *testing.T) {
	s := testSetup(t, `2026-01-01T00:00:00Z,web,6
2026-01-01T00:30:00Z,web,30
2026-01-01T02:00:00Z,web,8
2026-01-01T04:00:00Z,web,8
`, "web")
	s.World.SpotInterruptionsPerHour = 1
	s.World.InsufficientCapacity.Spot = 0.3
	encode := func(s Setup) string { return runJSON(t, s, defaultPolicy()) }
	first := encode(s)
	if again := encode(s); again != first {
		t.Fatalf("two runs of one seed differ:\n%s\n%s", first, again)
	}
	labelled := s
	labelled.LabelPasses = true
	if again := encode(labelled); again != first {
		t.Fatalf("a run whose passes are labelled for a profile differs:\n%s\n%s", first, again)
	}
	s.Seed = 2
	if other := encode(s); other == first {
		t.Fatal("another seed gave the very same run: the world's draws do not follow the seed")
	}
}

// Three hours of about 120 replicas whose demand follows the day, spot
// machines taken back and spot capacity short now and then: every look
// for machines to remove that takes the last look's records of the
// machines (the change feed's, at 10,000 machines a few dozen changed
// between two looks) is checked against a walk of every machine (a
// difference panics), and the run is the one an unchecked run makes.
func TestLooksFromTheLastLooksRecordsFindWhatAWalkFinds(t *testing.T) {
	s := testSetup(t, diurnalTrace(6, 20, 3*time.Hour), serviceNames(6)...)
	s.World.SpotInterruptionsPerHour = 2
	s.World.InsufficientCapacity.Spot = 0.2
	checked := defaultPolicy()
	checked.Config.Planner.CheckLookRecords = true
	if a, b := runJSON(t, s, checked), runJSON(t, s, defaultPolicy()); a != b {
		t.Fatalf("a checked run differs from an unchecked one:\n%s\n%s", a, b)
	}
}

// runJSON is the run of s under policy, as JSON.
func runJSON(t *testing.T, s Setup, policy Policy) string {
	t.Helper()
	res, err := simulate(context.Background(), s, policy, true)
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// Spot machines taken back: their agents go silent, the control loop
// replaces them and moves their replicas, which wait meanwhile.
func TestSpotInterruptionsAreFollowed(t *testing.T) {
	s := testSetup(t, `2026-01-01T00:00:00Z,web,12
2026-01-01T12:00:00Z,web,12
`, "web")
	s.World.SpotInterruptionsPerHour = 1
	res, err := simulate(context.Background(), s, defaultPolicy(), true)
	if err != nil {
		t.Fatal(err)
	}
	if res.Spot.Interruptions == 0 || res.Spot.Pending.Count == 0 || res.Disruptions.ReplicasStopped == 0 {
		t.Fatalf("interruptions %d, their replicas' waits %+v, replicas stopped %d", res.Spot.Interruptions, res.Spot.Pending, res.Disruptions.ReplicasStopped)
	}
	// Silent for 3 heartbeats (15 s), then the reschedule grace (30 s),
	// then a new machine's boot (at most 90 s) and start (10 s).
	if res.Spot.Pending.P50 < 45*time.Second || res.Spot.Pending.Max > 10*time.Minute {
		t.Errorf("interrupted replicas waited %+v", res.Spot.Pending)
	}
	// Their agents fall silent: some are found so (unreachable) before
	// a describe or a list finds their instances gone (vanished).
	if res.Disruptions.Terminations[decide.CauseUnreachable] == 0 || res.Disruptions.Terminations[decide.CauseVanished] == 0 {
		t.Errorf("terminations %v: want the lost machines terminated as unreachable and as vanished", res.Disruptions.Terminations)
	}
	if last := res.Series[len(res.Series)-1]; last.Pending > 0.5 {
		t.Errorf("%.1f replicas still wait at the end", last.Pending)
	}
}

// Spot out of capacity every time: the group (capacity type any) falls
// back to on demand.
func TestSpotOutOfCapacityFallsBackToOnDemand(t *testing.T) {
	s := testSetup(t, `2026-01-01T00:00:00Z,web,8
2026-01-01T02:00:00Z,web,8
`, "web")
	s.World.InsufficientCapacity.Spot = 1
	res, err := simulate(context.Background(), s, defaultPolicy(), true)
	if err != nil {
		t.Fatal(err)
	}
	var spot, onDemand float64
	for _, th := range res.MachineHours {
		if th.CapacityType == api.CapacitySpot {
			spot += th.Hours
		} else {
			onDemand += th.Hours
		}
	}
	if res.Disruptions.LaunchFailures == 0 || spot != 0 || onDemand == 0 {
		t.Fatalf("launch failures %d, spot hours %.2f, on-demand hours %.2f", res.Disruptions.LaunchFailures, spot, onDemand)
	}
}

// A world file changes the knobs it names; an unknown knob or a value
// out of range is refused, naming it.
func TestWorldFile(t *testing.T) {
	w, err := ReadWorld(DefaultWorld(), "w.yaml", []byte("bootToJoin: {min: 10s, max: 20s}\nspotInterruptionsPerHour: 0.01\n"))
	if err != nil {
		t.Fatal(err)
	}
	if w.BootToJoin != (Span{Min: 10 * time.Second, Max: 20 * time.Second}) || w.SpotInterruptionsPerHour != 0.01 || w.LaunchLatency != DefaultWorld().LaunchLatency {
		t.Fatalf("read %+v", w)
	}
	for data, want := range map[string]string{
		"bootToJion: {min: 1s}\n":             "bootToJion",
		"bootToJoin: {min: 20s, max: 10s}\n":  "bootToJoin",
		"insufficientCapacity: {spot: 1.5}\n": "insufficientCapacity.spot",
		"spotInterruptionsPerHour: -1\n":      "spotInterruptionsPerHour",
		"launchLatency: {min: soon}\n":        "soon",
	} {
		if _, err := ReadWorld(DefaultWorld(), "w.yaml", []byte(data)); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "w.yaml") {
			t.Errorf("%q: error %v, want one naming %s and the file", data, err, want)
		}
	}
}

// A spec whose clusters are all on the local provider runs in the local
// provider's world, which a world file changes as it changes the cloud's;
// any other cluster brings the cloud's. A gantry dev fleet replaces a
// machine that has not joined within a minute: in the cloud's world
// (boots of 40-90 s) some would be; in its own, none is.
func TestTheWorldFollowsTheProviders(t *testing.T) {
	local := &api.Cluster{Metadata: api.ObjectMeta{Name: "dev"}, Spec: api.ClusterSpec{Provider: api.ProviderSpec{Name: "local"}}}
	cloud := &api.Cluster{Metadata: api.ObjectMeta{Name: "prod"}, Spec: api.ClusterSpec{Provider: api.ProviderSpec{Name: "aws"}}}
	if w, name := WorldFor([]*api.Cluster{local}); name != "local" || !reflect.DeepEqual(w, LocalWorld()) {
		t.Errorf("local clusters: world %s %+v, want the local one", name, w)
	}
	if w, name := WorldFor([]*api.Cluster{local, cloud}); name != "cloud" || !reflect.DeepEqual(w, DefaultWorld()) {
		t.Errorf("a cloud cluster too: world %s %+v, want the cloud's", name, w)
	}
	if w, err := ReadWorld(LocalWorld(), "w.yaml", []byte("replicaStart: {min: 1s, max: 1s}\n")); err != nil ||
		w.BootToJoin != LocalWorld().BootToJoin || w.ReplicaStart != (Span{Min: time.Second, Max: time.Second}) {
		t.Errorf("a file over the local world: %+v %v, want its boot kept and its replica start changed", w, err)
	}

	joinTimeouts := func(w World) int {
		s := testSetup(t, "2026-01-01T00:00:00Z,web,20\n2026-01-01T01:00:00Z,web,2\n2026-01-01T02:00:00Z,web,2\n", "web")
		s.World = w
		p := defaultPolicy()
		p.Config.JoinTimeout = time.Minute // gantry dev's
		res, err := simulate(context.Background(), s, p, true)
		if err != nil {
			t.Fatal(err)
		}
		return res.Disruptions.Terminations[decide.CauseJoinTimeout]
	}
	if n := joinTimeouts(DefaultWorld()); n == 0 {
		t.Errorf("the cloud's world: no join timeout in a minute, want some (boots of 40-90 s)")
	}
	if n := joinTimeouts(LocalWorld()); n != 0 {
		t.Errorf("the local world: %d join timeouts, want none", n)
	}
}

// Spot prices from a price trace: the spot machines running are billed
// at the new price from then on, and the machines launched after are
// priced with it (on demand, once spot costs more).
func TestSpotPricesChangeOverTime(t *testing.T) {
	rows := `2026-01-01T00:00:00Z,web,8
2026-01-01T02:00:00Z,web,30
2026-01-01T04:00:00Z,web,30
`
	plain := testSetup(t, rows, "web")
	plain.World.SpotInterruptionsPerHour, plain.World.InsufficientCapacity.Spot = 0, 0
	priced := plain
	var err error
	priced.SpotPrices, err = trace.ReadSpotPrices(strings.NewReader(`time,instanceType,zone,price
2026-01-01T01:00:00Z,small,a,0.5
2026-01-01T01:00:00Z,small,b,0.5
2026-01-01T01:00:00Z,large,a,0.5
2026-01-01T01:00:00Z,large,b,0.5
`), func(string, string) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	before, err := simulate(context.Background(), plain, defaultPolicy(), true)
	if err != nil {
		t.Fatal(err)
	}
	after, err := simulate(context.Background(), priced, defaultPolicy(), true)
	if err != nil {
		t.Fatal(err)
	}
	hours := func(r Result, capacity string) float64 {
		h := 0.0
		for _, th := range r.MachineHours {
			if th.CapacityType == capacity {
				h += th.Hours
			}
		}
		return h
	}
	if hours(before, api.CapacityOnDemand) != 0 || hours(after, api.CapacityOnDemand) == 0 {
		t.Errorf("on-demand hours: %.2f at the catalog's prices, %.2f once spot costs more; want none, then some",
			hours(before, api.CapacityOnDemand), hours(after, api.CapacityOnDemand))
	}
	// The spot machines of the first hour run on at $0.50/h (at least one,
	// for three hours), at least three times what they cost before.
	if after.Cost < 0.5*3 || after.Cost < 3*before.Cost {
		t.Errorf("cost $%.2f with the price trace, $%.2f without", after.Cost, before.Cost)
	}
}

// A price trace names only spot offerings the catalog has, in time order.
func TestSpotPricesRefused(t *testing.T) {
	_, err := trace.ReadSpotPrices(strings.NewReader(`time,instanceType,zone,price
2026-01-01T01:00:00Z,small,a,0.5
2026-01-01T00:00:00Z,small,a,0.5
2026-01-01T02:00:00Z,huge,a,0.5
2026-01-01T03:00:00Z,small,a,-1
`), func(it, zone string) bool { return it == "small" })
	for _, want := range []string{"line 3", "line 4", "huge", "line 5", "price"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q: %v", want, err)
		}
	}
}

// Policies run side by side under a price trace each reprice their own
// catalogs: every run is what it is alone, and the setup's catalogs keep
// their prices (a copy of them that decoded into the setup's own map had
// the runs reprice one catalog together).
func TestPoliciesSideBySideUnderAPriceTraceRunAsAlone(t *testing.T) {
	s := testSetup(t, `2026-01-01T00:00:00Z,web,8
2026-01-01T02:00:00Z,web,30
2026-01-01T04:00:00Z,web,12
`, "web")
	var err error
	s.SpotPrices, err = trace.ReadSpotPrices(strings.NewReader(`time,instanceType,zone,price
2026-01-01T01:00:00Z,small,a,0.5
2026-01-01T03:00:00Z,small,a,0.01
`), func(string, string) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	before, err := json.Marshal(s.Catalogs)
	if err != nil {
		t.Fatal(err)
	}
	patient := defaultPolicy()
	patient.Name, patient.Config.Planner.MinLifetime = "patient", 3*time.Hour
	policies := []Policy{defaultPolicy(), patient}
	together, err := SimulateAll(context.Background(), s, policies, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range policies {
		alone, err := Simulate(s, p)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(alone, together[i]) {
			t.Errorf("policy %s: side by side cost $%.4f, alone $%.4f", p.Name, together[i].Cost, alone.Cost)
		}
	}
	if after, _ := json.Marshal(s.Catalogs); string(after) != string(before) {
		t.Errorf("the setup's catalogs changed:\n%s\n%s", before, after)
	}
}

// A warm pool's stopped machines are started for a burst and stopped
// again after: a started machine heartbeats again (the run checks, at
// every instant, that exactly the joined machines whose instances run
// were heard from).
func TestAWarmPoolsStartedMachinesHeartbeat(t *testing.T) {
	s := testSetup(t, `2026-01-01T00:00:00Z,web,2
2026-01-01T01:00:00Z,web,30
2026-01-01T02:00:00Z,web,2
2026-01-01T03:00:00Z,web,30
2026-01-01T04:00:00Z,web,2
`, "web")
	g := &s.Clusters[0].Spec.CapacityGroups[0]
	g.WarmPool, g.WarmPoolState = 4, api.WarmStopped
	res, err := simulate(context.Background(), s, defaultPolicy(), true)
	if err != nil {
		t.Fatal(err)
	}
	if res.Pending.Count < 56 {
		t.Errorf("pending episodes %d, want at least the 56 replicas made", res.Pending.Count)
	}
}

// Demand a policy never serves shows in what it reports, not only in a
// cheap bill: GPU replicas whose type is not in the catalog wait the
// whole run, each its hours, and still wait at its end.
func TestUnservedDemandIsReported(t *testing.T) {
	res := trainOnGPUs(t, 3, "h100")
	span := res.End.Sub(res.Start).Hours()
	if res.WaitingAtEnd != 3 || math.Abs(res.Pending.ReplicaHours-3*span) > 1e-9 {
		t.Errorf("3 replicas no machine can run over %.1f h: %d waiting at the end, %.3f replica-hours waited, want 3 and %.3f",
			span, res.WaitingAtEnd, res.Pending.ReplicaHours, 3*span)
	}
	if res = trainOnGPUs(t, 3, "a100"); res.WaitingAtEnd != 0 || res.Pending.ReplicaHours > 0.5 {
		t.Errorf("served: %d waiting at the end, %.3f replica-hours waited", res.WaitingAtEnd, res.Pending.ReplicaHours)
	}
}

// trainOnGPUs runs a service train of n replicas, each asking one GPU of
// gpuType, for two hours.
func trainOnGPUs(t *testing.T, n int, gpuType string) Result {
	t.Helper()
	s := testSetup(t, fmt.Sprintf("2026-01-01T00:00:00Z,train,%d\n2026-01-01T02:00:00Z,train,%d\n", n, n), "train")
	s.Services[0].Spec.Resources.GPU = &api.GPURequirement{Count: 1, Type: gpuType, Policy: api.GPURequired}
	res, err := simulate(context.Background(), s, defaultPolicy(), true)
	if err != nil {
		t.Fatal(err)
	}
	return res
}
