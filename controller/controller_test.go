package controller

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/decide"
	"github.com/gantry-dev/gantry/fleet"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/provisioner/fake"
	"github.com/gantry-dev/gantry/store"
)

const twoMachines = `kind: Cluster
metadata: {name: c}
spec:
  provider: {name: fake}
  agent: {version: v1, apiUrl: "https://gantry.example.com"}
  capacityGroups: [{groupId: g, instanceType: fake.small, minSize: 2, maxSize: 4, zones: [zone-a]}]
`

// A pass records launch intents first, then its workers launch them:
// with the intent's launch key and tags, the cluster's agent template in
// the bootstrap, and the instance recorded on the machine.
func TestLaunchIntentsThenProviderCalls(t *testing.T) {
	e := newEnv(t)
	e.apply(twoMachines)
	plan := e.pass()
	if len(plan.Launches) != 2 {
		t.Fatalf("launches %+v", plan.Launches)
	}
	calls := e.fakes["fake"].Calls(fake.OpLaunch)
	if len(calls) != 2 {
		t.Fatalf("%d launch calls", len(calls))
	}
	byKey := map[string]*api.Machine{}
	for _, m := range e.machines() {
		byKey[m.LaunchKey] = m
	}
	for _, c := range calls {
		m := byKey[c.Spec.IdempotencyKey]
		if m == nil || m.ProviderID != c.ID || m.JoinState != api.JoinBooting || m.Subnet == "" {
			t.Fatalf("machine for launch %s: %+v", c.Spec.IdempotencyKey, m)
		}
		b := c.Spec.Bootstrap
		if b.ServerURL != "https://gantry.example.com" || b.TemplateVersion != "v1" || b.MachineID != m.ID || b.JoinToken == "" {
			t.Fatalf("bootstrap %+v", b)
		}
		if c.Spec.Tags[provisioner.TagInstallation] != "inst-1" || c.Spec.Tags[provisioner.TagMachine] != m.ID {
			t.Fatalf("tags %v", c.Spec.Tags)
		}
	}
	if mem := e.memory(); len(mem.Outcomes) != 2 {
		t.Fatalf("the workers' outcomes: %+v", mem.Outcomes)
	}
	e.pass()
	if mem := e.memory(); len(mem.Outcomes) != 0 || mem.Desired["c/g"] != 2 {
		t.Fatalf("outcomes not folded or desired not kept: %+v", mem)
	}
}

// A hung provider stalls neither the pass nor other clusters: the pass
// returns while launches hang (more of them than a provider's workers),
// and a cluster of another provider is served; the hung calls end when
// released.
func TestHungProviderStallsNothingElse(t *testing.T) {
	e := newEnv(t, "slow", "quick")
	e.cfg.Calls.Concurrency = 1
	e.restart()
	e.fakes["slow"].Hang(fake.OpLaunch, true)
	e.fakes["slow"].Hang(fake.OpList, true)
	e.apply(strings.Replace(twoMachines, "{name: fake}", "{name: slow}", 1))
	e.apply(strings.NewReplacer("{name: fake}", "{name: quick}", "name: c}", "name: d}").Replace(twoMachines))
	if _, err := e.ctrl.pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	quick, slow := e.fakes["quick"], e.fakes["slow"]
	await(t, quick, "both quick launches done", func() bool { return len(quick.Calls(fake.OpLaunch)) == 2 })
	await(t, slow, "a slow call hanging (its only worker)", func() bool {
		return slow.InFlight(fake.OpLaunch)+slow.InFlight(fake.OpList) == 1
	})
	if _, err := e.ctrl.pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	slowLaunches := 0
	for call := range e.ctrl.calls.InFlight() {
		if strings.HasPrefix(call, decide.CallKey(decide.CallLaunch, "c-")) {
			slowLaunches++
		}
	}
	if slowLaunches != 2 {
		t.Fatalf("%d slow launches under way after another pass, want the same 2: %v", slowLaunches, e.ctrl.calls.InFlight())
	}
	e.fakes["slow"].Hang(fake.OpLaunch, false)
	e.fakes["slow"].Hang(fake.OpList, false)
	e.ctrl.Wait()
	if got := len(e.fakes["slow"].Calls(fake.OpLaunch)); got != 2 {
		t.Fatalf("%d slow launch calls, want 2", got)
	}
}

// A server killed between recording an intent and calling the provider
// sends the intent at its first pass, with the same launch key, instead
// of leaving the machine provisioning for the provider timeout (defect).
func TestIntentIsSentAgainAtStart(t *testing.T) {
	e := newEnv(t)
	e.apply(twoMachines)
	var intent *api.Machine
	e.update(func(tx store.Tx) error { // what the killed server left: the intent, no call
		cl, err := tx.GetCluster("c")
		if err != nil {
			return err
		}
		intent, err = fleet.RecordIntent(tx, fleet.Intent{Cluster: cl, Group: "g", InstanceType: "fake.small", Zone: "zone-a",
			CapacityType: api.CapacityOnDemand, ProviderKey: "fake"}, start, fleet.NewMachineID)
		return err
	})
	e.clock.Step(time.Second)
	plan := e.pass()
	if !slices.Contains(plan.LaunchCalls, intent.ID) {
		t.Fatalf("launch calls %v, want %s", plan.LaunchCalls, intent.ID)
	}
	keys := launchKeys(e.fakes["fake"].Calls(fake.OpLaunch))
	if !slices.Contains(keys, intent.LaunchKey) {
		t.Fatalf("launches %v, want the intent's key %s", keys, intent.LaunchKey)
	}
	for _, m := range e.machines() {
		if m.ID == intent.ID && (m.ProviderID == "" || m.JoinState != api.JoinBooting) {
			t.Fatalf("the intent was not launched: %+v", m)
		}
	}
}

// Launch backoff and a rollout under way survive a restart: the next
// server continues them instead of starting over.
func TestBackoffAndRolloutResumeAfterRestart(t *testing.T) {
	e := newEnv(t)
	e.cfg.Decide.LaunchBackoff = 30 * time.Second
	e.restart()
	e.apply(twoMachines)
	e.fakes["fake"].SetNextError(fake.OpLaunch, provisioner.Errorf(provisioner.KindTransport, "launch", "boom"), provisioner.Errorf(provisioner.KindTransport, "launch", "boom"))
	e.pass() // both launches fail
	e.pass() // folds the outcomes: backoff
	b := e.memory().Backoff["c/g"]
	if b.Failures != 2 {
		t.Fatalf("backoff %+v", b)
	}
	e.restart()
	e.clock.Step(10 * time.Second)
	if plan := e.pass(); len(plan.Launches) != 0 {
		t.Fatalf("the restarted server launched during the backoff: %+v", plan.Launches)
	}
	e.clock.SetTime(b.Until)
	if plan := e.pass(); len(plan.Launches) != 2 {
		t.Fatalf("no launch after the backoff: %+v", plan.Launches)
	}
	e.pass()
	e.join()
	e.pass()

	e.apply(strings.Replace(twoMachines, "version: v1", "version: v2", 1))
	plan := e.pass()
	if len(plan.Launches) != 1 || len(e.events(api.KindCluster, "c")) == 0 {
		t.Fatalf("rollout start: %+v", plan.Launches)
	}
	e.restart()
	e.clock.Step(time.Second)
	plan = e.pass()
	if len(plan.Launches) != 0 {
		t.Fatalf("the restarted server launched a second replacement: %+v", plan.Launches)
	}
	started := 0
	for _, ev := range e.events(api.KindCluster, "c") {
		if ev.Reason == "RolloutStarted" {
			started++
		}
	}
	if started != 1 {
		t.Fatalf("%d RolloutStarted events: the rollout started over", started)
	}
}

// A hand-joined machine (provider external) does not stop recovery of the
// providers after it: an orphan of one of them is terminated (defect).
func TestHandJoinedMachineDoesNotStopRecovery(t *testing.T) {
	e := newEnv(t, "zeta")
	e.cfg.Decide.OrphanGrace = time.Minute
	e.restart()
	e.apply(strings.Replace(twoMachines, "{name: fake}", "{name: zeta}", 1))
	e.update(func(tx store.Tx) error {
		return tx.CreateMachine(&api.Machine{ID: "by-hand", Cluster: "c", Group: "g", Provider: "external", ProviderKey: "external",
			JoinState: api.JoinJoined, FleetState: api.FleetReady, CreatedAt: start, LastHeartbeat: &start})
	})
	e.fakes["zeta"].Add(instance("i-orphan", "c-g-lost", start.Add(-time.Hour)))
	e.pass() // lists
	plan := e.pass()
	if len(plan.Orphans) != 1 || plan.Orphans[0].Instance.ID != "i-orphan" {
		t.Fatalf("orphans %+v", plan.Orphans)
	}
	if i := slices.IndexFunc(e.fakes["zeta"].Instances(), func(i provisioner.Instance) bool { return i.ID == "i-orphan" }); e.fakes["zeta"].Instances()[i].State != provisioner.StateTerminated {
		t.Fatal("the orphan still runs")
	}
}

// A machine that never joins is replaced with an event that says how far
// its boot got, from its console, with tokens redacted.
func TestJoinTimeoutEventCarriesTheConsole(t *testing.T) {
	e := newEnv(t)
	e.apply(twoMachines)
	e.pass()
	m := e.machines()[0]
	e.fakes["fake"].SetConsole(m.ProviderID, "[gantry-boot] start\n[gantry-boot] download\ntoken gjt1.abc.def\ncurl: (6) Could not resolve host\n")
	e.clock.Step(e.cfg.Decide.JoinTimeout + time.Second)
	e.pass()
	var msg string
	for _, ev := range e.events("Machine", m.ID) {
		if ev.Reason == "Terminating" {
			msg = ev.Message
		}
	}
	for _, want := range []string{"did not join within", "last boot step: download", "Could not resolve host", "<redacted>"} {
		if !strings.Contains(msg, want) {
			t.Fatalf("terminating event lacks %q: %q", want, msg)
		}
	}
	if strings.Contains(msg, "gjt1.abc") {
		t.Fatal("a token reached an event")
	}
}

// What the registry says of the clusters' providers: a catalog by the
// settings, or why the settings cannot be used; and which providers
// provision and stop.
func TestProviderFactsNameUnusableSettings(t *testing.T) {
	e := newEnv(t)
	catalogs, infos := providerFacts(e.registry, map[string]*api.Cluster{
		"ok":  {Spec: api.ClusterSpec{Provider: api.ProviderSpec{Name: "fake"}}},
		"bad": {Spec: api.ClusterSpec{Provider: api.ProviderSpec{Name: "nope"}}},
	})
	if catalogs["ok"].Key != "fake" || len(catalogs["ok"].Catalog) == 0 || !strings.Contains(catalogs["bad"].Err, "unknown provider") {
		t.Fatalf("catalogs %+v", catalogs)
	}
	if !infos["fake"].Provisions || infos["external"].Provisions || !infos["fake"].CanStop {
		t.Fatalf("infos %+v", infos)
	}
}

// await waits for the workers to bring a fake provider to a state
// (bounded, to fail rather than hang).
func await(t *testing.T, p *fake.Provider, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.Await(ctx, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// A provider that opens the overlay's port in a firewall of its own is
// asked, at each resync, to delete those of clusters that are gone: an
// overlay cluster's firewall stays while the cluster or one of its
// instances lives, and goes after both are gone.
func TestResyncSweepsTheFirewallsOfClustersGone(t *testing.T) {
	e := newEnv(t)
	e.apply(strings.Replace(twoMachines, "  agent:", "  network: {mode: overlay}\n  agent:", 1))
	e.pass()
	f := e.fakes["fake"]
	if got := f.Firewalls(); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("firewalls after the overlay cluster's launches: %v", got)
	}
	resync := func() {
		e.clock.Step(e.cfg.Decide.ResyncInterval + time.Second)
		for range 3 {
			e.pass()
		}
	}
	resync()
	if n := len(f.Calls(fake.OpSweep)); n == 0 || !slices.Equal(f.Firewalls(), []string{"c"}) {
		t.Fatalf("%d sweeps, firewalls %v: want the live cluster's kept", n, f.Firewalls())
	}
	e.update(func(tx store.Tx) error { return tx.DeleteCluster("c") })
	for range 5 {
		resync()
	}
	for _, inst := range f.Instances() {
		if inst.State != provisioner.StateTerminated {
			t.Fatalf("%s is %s after its cluster was deleted", inst.ID, inst.State)
		}
	}
	if got := f.Firewalls(); len(got) != 0 {
		t.Fatalf("firewalls %v after the cluster and its instances are gone", got)
	}
}

// A terminated machine's /24 is released only once its instance is gone:
// while the provider still shuts it down the machine stays terminating
// (out of every peer list and name, its /24 held), the call is retried
// with backoff, and the replacement gets another /24.
func TestSubnetIsReleasedOnlyOnceTheInstanceIsGone(t *testing.T) {
	e := newEnv(t)
	f := e.fakes["fake"]
	f.SlowTerminate(true)
	e.apply(twoMachines)
	e.pass()
	e.clock.Step(e.cfg.Decide.JoinTimeout + time.Minute)
	e.pass() // neither joined: both replaced
	e.pass()
	subnets := map[string]string{}
	var leaving []*api.Machine
	for _, m := range e.machines() {
		if m.Live() && m.Subnet != "" {
			if other, taken := subnets[m.Subnet]; taken {
				t.Fatalf("%s and %s share %s", m.ID, other, m.Subnet)
			}
			subnets[m.Subnet] = m.ID
		}
		if m.FleetState == api.FleetTerminating {
			leaving = append(leaving, m)
		}
	}
	if len(leaving) != 2 || len(subnets) != 4 {
		t.Fatalf("%d machines terminating, %d /24s held: want the 2 replaced ones still holding theirs beside the 2 new", len(leaving), len(subnets))
	}
	for _, m := range leaving {
		f.SetState(m.ProviderID, provisioner.StateTerminated)
	}
	e.clock.Step(e.cfg.Decide.MaxTerminateBackoff)
	e.pass()
	for _, m := range e.machines() {
		for _, l := range leaving {
			if m.ID == l.ID && m.FleetState != api.FleetTerminated {
				t.Fatalf("%s is %s once its instance is gone", m.ID, m.FleetState)
			}
		}
	}
	released := 0
	for _, ev := range e.events("Machine", "") {
		if ev.Reason == "Terminated" && strings.Contains(ev.Message, "released") {
			released++
		}
	}
	if released != 2 {
		t.Fatalf("%d Terminated events releasing a /24, want 2", released)
	}
}
