// Package decidetest is the harness for tests of decisions: small
// builders make a snapshot (clusters, services, machines, replicas), Decide
// runs the real decide at the harness's time, and Apply plays the plan
// back onto the snapshot the way the act step and the providers would
// (instantly, and without a store), so a test steps the time and decides
// again. Nothing sleeps; nothing runs.
package decidetest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/decide"
	"github.com/gantry-dev/gantry/decide/playback"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/replica"
	"github.com/gantry-dev/gantry/spec"
)

// Provider is the harness clusters' provider; External provisions nothing.
const (
	Provider = "fake"
	External = "external"
)

// Start is the harness's first instant.
var Start = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// Harness holds a snapshot, the memory and the time between passes.
type Harness struct {
	// World is the snapshot (Snap) and the time (Now), and plays plans
	// back onto it.
	playback.World
	T      testing.TB
	Config decide.Config
	Memory decide.Memory
	// Events are every pass's events, in order.
	Events []decide.Event
	// Skippable counts the passes the controller would have skipped
	// (decide.Asleep): each one's plan was checked to be idle, as the
	// full pass that ran instead must be.
	Skippable int
	// Woken counts passes whose inputs were unchanged but which a
	// deadline (or a silence) woke, and which then decided something.
	Woken int
	// ReusedCapacity counts the passes that took the last pass's
	// scheduling and plan (decide.Booking.ReusedCapacity), each checked
	// against a pass that made its own.
	ReusedCapacity int
	// ReusedScheduling counts the passes that took the last pass's
	// scheduling but planned afresh (its plan's deadline come), each
	// checked the same way.
	ReusedScheduling int
	last             *lastPass
	// booked is the last pass's booking, handed to the next (as the
	// controller does) with what changed since the objects it was booked
	// from, frozen.
	booked *decide.Booking
	frozen *frozenObjects
	// scratch is handed to every pass from a booking and cleared after
	// every other one: a pass whose plan or booking pointed into it would
	// break, but for the view a booking may leave there for the next pass
	// (which a clearing voids). The passes afresh work in their own,
	// cleared after each; PatchedViews counts the passes that took the
	// last pass's view.
	scratch, freshScratch decide.Scratch
	// KeepScratch: the scratch is never cleared, as a controller's is not
	// (tests of what it keeps alive).
	KeepScratch         bool
	passes              int
	PatchedViews        int
	PatchedPlacingViews int
	// TouchedBookings counts the passes that booked only the machines a
	// change touched.
	TouchedBookings int
	// SplicedViews counts the passes that patched the view of a pass
	// with other machines, those made and deleted since spliced;
	// PartlyWalkedViews those that walked only the entries of their view
	// whose idle times could have changed.
	SplicedViews      int
	PartlyWalkedViews int
}

// lastPass is what the previous Decide saw and decided.
type lastPass struct {
	plan   decide.Plan
	idle   bool
	inputs string
	obs    decide.Snapshot
}

// New is a harness at Start with no cluster, whose server has recorded
// heartbeats for an hour. Each look for machines to remove that takes
// the last look's records is checked against a walk of every machine
// (planner.Config.CheckLookRecords).
func New(t testing.TB) *Harness {
	cfg := decide.DefaultConfig()
	cfg.Planner.CheckLookRecords = true
	return &Harness{T: t, Config: cfg, Memory: decide.NewMemory(), World: playback.World{Now: Start, Snap: &decide.Snapshot{
		Clusters: map[string]*api.Cluster{}, Catalogs: map[string]decide.ClusterProvider{},
		Providers: map[string]decide.ProviderInfo{
			Provider: {Provisions: true, CanStop: true, Runtimes: []string{"process"}},
			External: {},
		},
		Instances: map[string]decide.InstanceObservation{}, Inventories: map[string]decide.Inventory{},
		ListedAt: map[string]time.Time{Provider: Start}, InFlight: map[string]bool{}, LivenessSince: Start.Add(-time.Hour),
	}}}
}

// Catalog is the harness provider's instance types: small (1 CPU, 1 GiB)
// and large (4 CPU, 8 GiB) in zones a and b, on demand and spot; gpu (8
// CPU, 32 GiB, two 80 GB a100) in zone a, on demand.
func Catalog() []provisioner.InstanceType {
	offer := func(price float64, zones ...string) []provisioner.Offering {
		var out []provisioner.Offering
		for _, z := range zones {
			out = append(out, provisioner.Offering{Zone: z, CapacityType: api.CapacityOnDemand, PricePerHour: price},
				provisioner.Offering{Zone: z, CapacityType: api.CapacitySpot, PricePerHour: price / 3})
		}
		return out
	}
	return []provisioner.InstanceType{
		{Name: "small", MilliCPU: 1000, MemoryBytes: 1 << 30, EphemeralBytes: 20 << 30, Offerings: offer(0.02, "a", "b")},
		{Name: "large", MilliCPU: 4000, MemoryBytes: 8 << 30, EphemeralBytes: 80 << 30, Offerings: offer(0.08, "a", "b")},
		{Name: "gpu", MilliCPU: 8000, MemoryBytes: 32 << 30, EphemeralBytes: 200 << 30, GPUs: []provisioner.GPU{{Type: "a100", Count: 2, VRAMGB: 80}},
			Offerings: []provisioner.Offering{{Zone: "a", CapacityType: api.CapacityOnDemand, PricePerHour: 3}}},
	}
}

// Group is a capacity group of one instance type.
func Group(id, instanceType string, minSize, maxSize int) api.CapacityGroup {
	return api.CapacityGroup{GroupID: id, InstanceType: instanceType, MinSize: minSize, MaxSize: maxSize,
		CapacityType: api.CapacityOnDemand, WarmPoolState: api.WarmRunning}
}

// Cluster adds a cluster of the harness provider.
func (h *Harness) Cluster(name string, groups ...api.CapacityGroup) *api.Cluster {
	c := &api.Cluster{Kind: api.KindCluster, Metadata: api.ObjectMeta{Name: name, Generation: 1}, Spec: api.ClusterSpec{
		Provider: api.ProviderSpec{Name: Provider}, CapacityGroups: groups, ContainerCIDR: "10.244.0.0/16", Rollout: api.RolloutPolicy{MaxSurge: 1}}}
	h.Snap.Clusters[name] = c
	h.Snap.Catalogs[name] = decide.ClusterProvider{Key: Provider, Catalog: Catalog()}
	return c
}

// Service adds a command service of replicas, each asking cpu and memory.
func (h *Harness) Service(name, cluster string, replicas int, cpu, memory string, edit ...func(*api.ServiceSpec)) *api.Service {
	s := &api.Service{Kind: api.KindService, Metadata: api.ObjectMeta{Name: name, Generation: 1}, Spec: api.ServiceSpec{
		Cluster: cluster, Command: []string{"serve"}, Replicas: &replicas, Resources: api.ServiceResources{CPU: cpu, Memory: memory},
		Isolation: api.IsolationAny}}
	for _, e := range edit {
		e(&s.Spec)
	}
	h.Snap.Services = slices.DeleteFunc(h.Snap.Services, func(o *api.Service) bool { return o.Metadata.Name == name })
	h.Snap.Services = append(h.Snap.Services, s)
	return s
}

// Machine adds a machine of a cluster's group that joined an hour ago and
// heartbeats now.
func (h *Harness) Machine(cluster, group, instanceType string, edit ...func(*api.Machine)) *api.Machine {
	n := h.Next()
	it, ok := provisioner.FindInstanceType(Catalog(), instanceType)
	if !ok {
		h.T.Fatalf("no instance type %q in the harness catalog", instanceType)
	}
	joined, beat := h.Now.Add(-time.Hour), h.Now
	m := &api.Machine{ID: fmt.Sprintf("%s-%s-%d", cluster, group, n), Cluster: cluster, Group: group, InstanceType: it.Name,
		Zone: it.Offerings[0].Zone, CapacityType: api.CapacityOnDemand, PricePerHour: it.Offerings[0].PricePerHour,
		Provider: Provider, ProviderKey: Provider, ProviderID: fmt.Sprintf("i-%d", n), LaunchKey: fmt.Sprintf("lk-%d", n),
		Addresses: []string{fmt.Sprintf("10.0.0.%d", n)}, Subnet: fmt.Sprintf("10.244.%d.0/24", n),
		JoinState: api.JoinJoined, FleetState: api.FleetReady, Runtimes: []string{"process"},
		Capacity:  it.Resources(),
		CreatedAt: joined, StateChangedAt: joined, JoinedAt: &joined, LastHeartbeat: &beat}
	m.GPUs = it.GPUDevices()
	if cl := h.Snap.Clusters[cluster]; cl != nil {
		g, _ := cl.Group(group)
		m.TemplateHash, m.Labels = spec.TemplateHash(cl, group), g.Labels
	}
	for _, e := range edit {
		e(m)
	}
	h.Snap.Machines = append(h.Snap.Machines, m)
	return m
}

// Replica adds replica index of a service, running on machine.
func (h *Harness) Replica(service string, index int, machine string) *api.Replica {
	svc := h.service(service)
	r := replica.New(replica.ID(service, index), service, svc.Spec.Cluster, index, spec.RevisionHash(svc.Spec, nil), spec.Requests(svc.Spec), h.Now)
	r.Machine, r.State, r.Health = machine, api.ReplicaRunning, api.HealthHealthy
	h.Snap.Replicas = append(h.Snap.Replicas, r)
	return r
}

func (h *Harness) service(name string) *api.Service {
	s := h.ServiceByName(name)
	if s == nil {
		h.T.Fatalf("no service %s", name)
	}
	return s
}

// Step moves the time on.
func (h *Harness) Step(d time.Duration) { h.Now = h.Now.Add(d) }

// LooksFromRecords counts the passes' looks for machines to remove that
// read fewer than every machine, each checked against a pass afresh.
func (h *Harness) LooksFromRecords() int { return h.scratch.LooksFromRecords() }

// Decide runs one pass at the harness's time and keeps its memory.
func (h *Harness) Decide() decide.Plan {
	h.T.Helper()
	h.inStoreOrder()
	before, memBefore := snapshotJSON(h.T, h.Snap), h.memoryJSON()
	inputs := h.inputs()
	asleep := h.last != nil && h.last.idle && h.last.inputs == inputs && decide.SameObservations(&h.last.obs, h.Snap) &&
		decide.Asleep(h.Config, h.last.plan, h.Snap, h.Now)
	plan := h.decideBothWays()
	h.checkPendingChanged(plan)
	if after := snapshotJSON(h.T, h.Snap); after != before {
		h.T.Fatalf("decide changed its snapshot: a server's view shares the snapshot's objects between passes")
	}
	if after := h.memoryJSON(); after != memBefore {
		h.T.Fatalf("decide changed the memory it was handed: a server's decoder keeps it for the next pass")
	}
	idle := plan.Idle(h.Snap, h.Memory)
	unchanged := h.last != nil && h.last.idle && h.last.inputs == inputs && decide.SameObservations(&h.last.obs, h.Snap)
	if unchanged && !asleep && !idle {
		h.Woken++
	}
	if asleep {
		h.Skippable++
		if !idle {
			h.T.Fatalf("at %s a pass with unchanged inputs before its wake (%s) decides something; the incremental pass would have skipped it: %s",
				h.Now.Format(time.RFC3339Nano), h.last.plan.Wake.At.Format(time.RFC3339Nano), Describe(plan))
		}
	}
	h.last = &lastPass{plan: plan, idle: idle, inputs: inputs, obs: observations(h.Snap)}
	h.Memory = plan.Memory
	h.Events = append(h.Events, plan.Events...)
	h.Snap.Inventories = map[string]decide.Inventory{}
	return plan
}

// checkPendingChanged fails unless every pending reason the snapshot's
// replica does not say is among those the act step writes
// (Plan.PendingChanged), by id.
func (h *Harness) checkPendingChanged(plan decide.Plan) {
	h.T.Helper()
	if !slices.IsSorted(plan.PendingChanged) {
		h.T.Fatalf("the pending reasons to write are not by id: %v", plan.PendingChanged)
	}
	for id, why := range plan.Pending {
		r := h.ReplicaByID(id)
		if r == nil || r.Machine != "" || r.Pod != "" || r.State == api.ReplicaPending && r.Reason == why {
			continue
		}
		if _, found := slices.BinarySearch(plan.PendingChanged, id); !found {
			h.T.Fatalf("at %s replica %s waits (%s: %q), told %q, and is not among the pending reasons to write: %v",
				h.Now.Format(time.RFC3339Nano), id, r.State, r.Reason, why, plan.PendingChanged)
		}
	}
}

// memoryJSON is the harness's memory as the store would hold it.
func (h *Harness) memoryJSON() string {
	h.T.Helper()
	entries, err := h.Memory.Entries()
	if err != nil {
		h.T.Fatalf("encoding the memory: %v", err)
	}
	return encode(h.T, entries)
}

// decideBothWays decides the pass from the last pass's booking and what
// changed since, as the controller does, and without it, and fails
// unless both book and decide the same: the booking is a memo.
func (h *Harness) decideBothWays() decide.Plan {
	h.T.Helper()
	h.Snap.Booked, h.Snap.Changed = h.booked, h.frozen.changes(h.T, h.Snap, h.Memory)
	fromBooking := h.Config
	fromBooking.RebookShare = 1 // from the booking however much changed, to check it
	fromBooking.WalkShare = 1   // and walking only the entries that could need it
	h.Snap.Scratch = &h.scratch
	defer func() { h.Snap.Scratch = nil }()
	plan := decide.Decide(fromBooking, h.Snap, h.Memory, h.Now)
	if why := plan.Booked.ViewUnshared(); why != "" {
		h.T.Fatalf("at %s %s", h.Now.Format(time.RFC3339Nano), why)
	}
	if why := plan.Booked.SumsDiffer(); why != "" {
		h.T.Fatalf("at %s %s", h.Now.Format(time.RFC3339Nano), why)
	}
	if h.passes++; h.passes%2 == 0 && !h.KeepScratch {
		h.scratch.Clear()
	}
	if plan.Booked.PatchedView() {
		h.PatchedViews++
	}
	if plan.Booked.PatchedPlacingView() {
		h.PatchedPlacingViews++
	}
	if plan.Booked.BookedTouched() {
		h.TouchedBookings++
	}
	if plan.Booked.PatchedSplicedView() {
		h.SplicedViews++
	}
	if plan.Booked.PartlyWalkedView() {
		h.PartlyWalkedViews++
	}
	h.Snap.Booked = nil
	if h.booked != nil {
		// Afresh, and without what the snapshot vouches for: every replica
		// walked.
		walked := *h.Snap
		walked.InStoreOrder, walked.Retiring, walked.Moving, walked.Unplaced, walked.Orphaned = false, nil, nil, nil, nil
		walked.Draining = nil
		walked.MachinesByID = false
		walked.HeardFrom = nil
		walked.Scratch = &h.freshScratch
		full := decide.Decide(h.Config, &walked, h.Memory, h.Now)
		if why := full.Booked.ViewUnshared(); why != "" {
			h.T.Fatalf("at %s afresh: %s", h.Now.Format(time.RFC3339Nano), why)
		}
		if why := full.Booked.SumsDiffer(); why != "" {
			h.T.Fatalf("at %s afresh: %s", h.Now.Format(time.RFC3339Nano), why)
		}
		h.freshScratch.Clear()
		kept, fresh := plan, full
		kept.Booked, fresh.Booked = nil, nil
		if diff := plan.Booked.Differs(full.Booked); diff != "" {
			h.T.Fatalf("at %s a pass booked from the last pass's booking and what changed since otherwise than afresh: %s", h.Now.Format(time.RFC3339Nano), diff)
		}
		if !reflect.DeepEqual(kept, fresh) {
			h.T.Fatalf("at %s a pass from the last pass's booking (and the snapshot's word) decided otherwise than one booking afresh (walking every replica):\nfrom the booking: %s\nafresh: %s",
				h.Now.Format(time.RFC3339Nano), Describe(plan), Describe(full))
		}
	}
	if plan.Booked.ReusedCapacity() {
		h.ReusedCapacity++
	}
	if plan.Booked.ReusedScheduling() {
		h.ReusedScheduling++
	}
	h.booked, h.frozen = plan.Booked, freeze(h.T, h.Snap, h.Memory)
	return plan
}

// inStoreOrder lists the snapshot's replicas as the store and a server's
// view do: by service and id (decide finds replicas by binary search in
// that order), and vouches for it when every id is its service's, says
// whether any is retiring or moving, and lists those on no machine, as a
// server's view does.
func (h *Harness) inStoreOrder() {
	slices.SortStableFunc(h.Snap.Replicas, func(a, b *api.Replica) int {
		return cmp.Or(strings.Compare(a.Service, b.Service), strings.Compare(a.ID, b.ID))
	})
	h.Snap.InStoreOrder = !slices.ContainsFunc(h.Snap.Replicas, outsideService)
	h.Snap.MachinesByID = slices.IsSortedFunc(h.Snap.Machines, func(a, b *api.Machine) int { return strings.Compare(a.ID, b.ID) })
	h.Snap.Unplaced, h.Snap.Moving, h.Snap.Orphaned, h.Snap.Retiring = []string{}, []string{}, []string{}, []string{}
	for _, r := range h.Snap.Replicas {
		if r.RetiringSince != nil {
			h.Snap.Retiring = append(h.Snap.Retiring, r.ID)
		}
		if r.Machine == "" {
			h.Snap.Unplaced = append(h.Snap.Unplaced, r.ID)
		}
		if r.PreviousMachine != "" {
			h.Snap.Moving = append(h.Snap.Moving, r.ID)
		}
		orphan := !slices.ContainsFunc(h.Snap.Services, func(s *api.Service) bool { return s.Metadata.Name == r.Service })
		if orphan && !slices.Contains(h.Snap.Orphaned, r.Service) {
			h.Snap.Orphaned = append(h.Snap.Orphaned, r.Service)
		}
	}
	slices.Sort(h.Snap.Orphaned)
	h.Snap.Draining = drainingOf(h.Snap)
	h.Snap.HeardFrom = heardFrom(h.Snap, h.Now)
}

// heardFrom is what a keeper of heartbeats vouches for at now: every
// machine beat at or after now but those it names (decide.HeardFrom).
func heardFrom(s *decide.Snapshot, now time.Time) *decide.HeardFrom {
	heard := &decide.HeardFrom{Since: now, Except: map[string]bool{}}
	for i, m := range s.Machines {
		var last int64
		if m.LastHeartbeat != nil {
			last = m.LastHeartbeat.UnixNano()
		}
		if i < len(s.Heartbeats) {
			last = max(last, s.Heartbeats[i])
		}
		if m.LastHeartbeat == nil && last == 0 || last < now.UnixNano() {
			heard.Except[m.ID] = true
		}
	}
	return heard
}

// drainingOf lists the replicas on each draining machine or moving off
// it, as a server's view does (decide.Snapshot.Draining).
func drainingOf(s *decide.Snapshot) map[string][]string {
	out := map[string][]string{}
	for _, m := range s.Machines {
		if m.FleetState == api.FleetDraining {
			out[m.ID] = []string{}
		}
	}
	for _, r := range s.Replicas {
		for _, m := range []string{r.Machine, r.PreviousMachine} {
			if list, ok := out[m]; ok && m != "" {
				out[m] = append(list, r.ID)
			}
		}
	}
	return out
}

func outsideService(r *api.Replica) bool { return !replica.NamedInService(r) }

// Pass decides, then applies the plan.
func (h *Harness) Pass() decide.Plan {
	h.T.Helper()
	plan := h.Decide()
	h.Apply(plan)
	return plan
}

// Outcome leaves a provider call's outcome, as a worker would.
func (h *Harness) Outcome(o decide.Outcome) {
	n := h.Next()
	if o.At.IsZero() {
		o.At = h.Now
	}
	h.Memory.Outcomes[fmt.Sprintf("o-%d", n)] = o
}

// Join makes every launched machine's agent join, with its instance
// type's resources and its provider's runtimes.
func (h *Harness) Join() {
	h.T.Helper()
	h.check(h.World.Join())
}

// Run makes every assigned replica's agent report it running and
// healthy (a moving replica's new copy takes over).
func (h *Harness) Run() {
	h.T.Helper()
	h.check(h.World.Run())
}

// Settle passes, joining machines and running replicas before each,
// until a pass changes nothing with every machine joined and every placed
// replica running, or limit passes ran.
func (h *Harness) Settle(limit int) decide.Plan {
	h.T.Helper()
	var plan decide.Plan
	for i := 0; i < limit; i++ {
		h.Join()
		h.Run()
		h.Heartbeat()
		plan = h.Pass()
		if quiet(plan) && h.steady() {
			return plan
		}
		h.Step(h.Config.HeartbeatInterval)
	}
	h.T.Fatalf("no steady state after %d passes; last plan: %+v", limit, plan)
	return plan
}

// steady: every machine joined, every placed replica runs where it is.
func (h *Harness) steady() bool {
	for _, m := range h.Snap.Machines {
		if m.Launching() {
			return false
		}
	}
	for _, r := range h.Snap.Replicas {
		if r.Machine != "" && (r.State != api.ReplicaRunning || r.PreviousMachine != "") {
			return false
		}
	}
	return true
}

func quiet(p decide.Plan) bool {
	return len(p.CreateReplicas)+len(p.Reverts)+len(p.DeleteReplicas)+len(p.RetireReplicas)+len(p.EndMoves)+len(p.Launches)+len(p.LaunchCalls)+len(p.Starts)+len(p.Stops)+
		len(p.Drains)+len(p.Terminates)+len(p.TerminateCalls)+len(p.Assignments)+len(p.Evictions)+len(p.Unreachable)+len(p.Adoptions)+len(p.Orphans) == 0
}

// inputs is what a pass decides from, but heartbeats and observations:
// the store's objects and the memory.
func (h *Harness) inputs() string {
	machines := make([]api.Machine, len(h.Snap.Machines))
	for i, m := range h.Snap.Machines {
		machines[i] = *m
		machines[i].LastHeartbeat = nil
	}
	s := h.Snap
	data, err := json.Marshal([]any{s.Clusters, s.Services, s.FailoverGroups, machines, s.Replicas, h.Memory})
	if err != nil {
		h.T.Fatal(err)
	}
	return string(data)
}

// observations copies a snapshot's observations of the world outside the
// store (the harness changes its maps in place).
func observations(s *decide.Snapshot) decide.Snapshot {
	return decide.Snapshot{Catalogs: copyCatalogs(s.Catalogs), Providers: maps.Clone(s.Providers), Instances: maps.Clone(s.Instances),
		Inventories: maps.Clone(s.Inventories), ListedAt: maps.Clone(s.ListedAt), InFlight: maps.Clone(s.InFlight),
		Kubernetes: maps.Clone(s.Kubernetes), SecretRevisions: maps.Clone(s.SecretRevisions), LivenessSince: s.LivenessSince}
}

// copyCatalogs copies the catalogs down to their offerings: a test (or
// the simulator's price trace) may change a price in place, which a
// server sees as a new catalog, and the pass after must not look asleep.
func copyCatalogs(in map[string]decide.ClusterProvider) map[string]decide.ClusterProvider {
	if in == nil {
		return nil
	}
	out := make(map[string]decide.ClusterProvider, len(in))
	for name, cp := range in {
		cp.Catalog = slices.Clone(cp.Catalog)
		for i := range cp.Catalog {
			cp.Catalog[i].GPUs, cp.Catalog[i].Offerings = slices.Clone(cp.Catalog[i].GPUs), slices.Clone(cp.Catalog[i].Offerings)
		}
		out[name] = cp
	}
	return out
}

// Describe summarises what a plan does, for failure messages.
func Describe(p decide.Plan) string {
	return fmt.Sprintf("create %d, delete %d, retire %d, end moves %d, reverts %d, launches %d, launch calls %d, starts %d, stops %d, drains %d, "+
		"terminates %d, terminate calls %d, unreachable %d, describes %v, lists %v, fences %d, adoptions %d, orphans %d, evictions %d, assignments %d, events %+v",
		len(p.CreateReplicas), len(p.DeleteReplicas), len(p.RetireReplicas), len(p.EndMoves), len(p.Reverts), len(p.Launches), len(p.LaunchCalls),
		len(p.Starts), len(p.Stops), len(p.Drains), len(p.Terminates), len(p.TerminateCalls), len(p.Unreachable), p.Describes, p.Lists,
		len(p.Fences), len(p.Adoptions), len(p.Orphans), len(p.Evictions), len(p.Assignments), p.Events)
}

// snapshotJSON is the snapshot's objects as JSON (decide must leave them
// as they are).
func snapshotJSON(t testing.TB, s *decide.Snapshot) string {
	data, err := json.Marshal([]any{s.Clusters, s.Services, s.FailoverGroups, s.Machines, s.Replicas})
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// Scratch is the scratch the passes from a booking work in.
func (h *Harness) Scratch() *decide.Scratch { return &h.scratch }
