package decide_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/decide"
	"github.com/gantry-dev/gantry/decide/decidetest"
	"github.com/gantry-dev/gantry/failover"
	"github.com/gantry-dev/gantry/fleet"
	"github.com/gantry-dev/gantry/spec"
)

// failoverHarness has clusters east and west, one machine each, and
// group pg expanded into its two services, as the server stores them.
func failoverHarness(t *testing.T) *decidetest.Harness {
	h := decidetest.New(t)
	for _, c := range []string{"east", "west"} {
		h.Cluster(c, decidetest.Group("db", "large", 1, 2))
		h.Machine(c, "db", "large")
	}
	g := &api.FailoverGroup{Kind: api.KindFailoverGroup, Metadata: api.ObjectMeta{Name: "pg"}, Spec: api.FailoverGroupSpec{
		Primary: api.FailoverSide{Cluster: "east"}, Replica: api.FailoverSide{Cluster: "west"},
		Capability: api.FailoverCapability{Name: api.CapabilityPostgres},
		Template:   api.ServiceSpec{Ports: []api.Port{{Name: "postgres"}}, Resources: api.ServiceResources{CPU: "500m", Memory: "512Mi"}}}}
	spec.DefaultFailoverGroup(g)
	h.Snap.FailoverGroups = []*api.FailoverGroup{g}
	h.Snap.Services = append(h.Snap.Services, spec.FailoverMembers(g)...)
	return h
}

// members makes every placed member report the role the group gives it,
// as `gantry member` does through its agent, except those on machines
// that are down.
func members(h *decidetest.Harness, down ...string) {
	st := h.Memory.Failover["pg"]
	for _, r := range h.Snap.Replicas {
		if r.Machine == "" || slices.Contains(down, r.Machine) {
			continue
		}
		home := failover.HomePrimary
		if r.Service == "pg-west" {
			home = failover.HomeReplica
		}
		role, _ := failover.Role(st, home, decide.Instance(r))
		r.Member = &api.MemberStatus{Role: role, Epoch: st.Epoch, Serving: role != api.RoleFenced}
		// PostgreSQL's replication, caught up: the primary at WAL position
		// 100, the replica having received all of it.
		switch role {
		case api.RolePrimary:
			r.Member.Replication = &api.ReplicationStatus{FlushPosition: 100}
		case api.RoleReplica:
			r.Member.Replication = &api.ReplicationStatus{Name: "standby-" + r.Machine, ReceivedPosition: 100, Streaming: true}
		}
		r.Address, r.HostPorts = "10.0.0.1", map[string]int{"postgres": 5432}
	}
}

func (hs harnessSteps) pass(down ...string) decide.Plan {
	h := hs.h
	h.Join()
	h.Run()
	for _, m := range h.Snap.Machines {
		if !slices.Contains(down, m.ID) && m.JoinState == api.JoinJoined {
			beat := h.Now
			m.LastHeartbeat = &beat
		}
	}
	p := h.Pass()
	members(h, down...)
	return p
}

type harnessSteps struct{ h *decidetest.Harness }

// healthyGroup is failoverHarness, edited, passed until the group is
// healthy.
func healthyGroup(t *testing.T, edit func(*decidetest.Harness)) (*decidetest.Harness, harnessSteps) {
	h := failoverHarness(t)
	if edit != nil {
		edit(h)
	}
	hs := harnessSteps{h}
	for range 6 {
		hs.pass()
		h.Step(time.Second)
	}
	if st := h.Memory.Failover["pg"]; st.Phase != failover.PhaseHealthy {
		t.Fatalf("want the group healthy: %+v", st)
	}
	return h, hs
}

func TestFailoverFencesThenPromotesThroughThePlan(t *testing.T) {
	h, hs := healthyGroup(t, nil)
	st := h.Memory.Failover["pg"]
	if st.Phase != failover.PhaseHealthy || st.Epoch != 1 || st.Primary != failover.HomePrimary {
		t.Fatalf("want healthy with east primary: %+v", st)
	}
	east := h.ReplicaByID("pg-east-0").Machine
	lastBeat := h.Now.Add(-time.Second)
	var fences []decide.Fence
	for h.Now.Before(lastBeat.Add(10 * time.Second)) {
		p := hs.pass(east)
		if len(p.Fences) > 0 || h.Memory.Failover["pg"].Epoch != 1 {
			t.Fatalf("fenced or promoted before the lease ran out at %s: %+v", h.Now, h.Memory.Failover["pg"])
		}
		h.Step(time.Second)
	}
	var p decide.Plan
	for range 3 {
		if p = hs.pass(east); len(p.Fences) > 0 {
			break
		}
	}
	fences = p.Fences
	if len(fences) != 1 || fences[0].Machine != east || !slices.ContainsFunc(p.Terminates, func(x decide.Terminate) bool { return x.Machine == east && x.Cause == decide.CauseFenced }) {
		t.Fatalf("want the old primary's machine fenced and terminated: fences %+v terminates %+v", fences, p.Terminates)
	}
	h.Step(time.Second)
	if p := hs.pass(east); len(p.Fences) != 0 || h.Memory.Failover["pg"].Epoch != 1 {
		t.Fatalf("no second fence call before the retry interval, no promotion before the provider confirms: %+v", p.Fences)
	}
	h.Outcome(decide.Outcome{Call: decide.CallFence, Machine: east, Cluster: "east"})
	hs.pass(east)
	st = h.Memory.Failover["pg"]
	if st.Epoch != 2 || st.Primary != failover.HomeReplica || !st.FenceConfirmed && st.Phase == failover.PhaseFencing {
		t.Fatalf("want west promoted at epoch 2 once the fence is confirmed: %+v", st)
	}
	reasons := map[string]bool{}
	for _, e := range h.Events {
		if e.ObjectKind == api.KindFailoverGroup {
			reasons[e.Reason] = true
		}
	}
	for _, want := range []string{"PrimaryFailed", "Fenced", "Promoted"} {
		if !reasons[want] {
			t.Fatalf("events lack %s: %v", want, reasons)
		}
	}
}

func TestFailedFenceIsRetriedAndBlocksThePromotion(t *testing.T) {
	h, hs := healthyGroup(t, nil)
	east := h.ReplicaByID("pg-east-0").Machine
	for range 12 {
		hs.pass(east)
		h.Step(time.Second)
	}
	h.Outcome(decide.Outcome{Call: decide.CallFence, Machine: east, Error: "instance i-1 is still running"})
	hs.pass(east)
	if st := h.Memory.Failover["pg"]; st.Epoch != 1 || st.FenceError == "" {
		t.Fatalf("an unconfirmed fence must block the promotion: %+v", st)
	}
	h.Step(h.Config.DescribeInterval)
	if p := hs.pass(east); len(p.Fences) != 1 {
		t.Fatalf("want the fence tried again, got %+v", p.Fences)
	}
}

// A primary on a machine joined by hand cannot be stopped through a
// provider: the group waits the lease plus the margin, says so, and
// promotes without a fence call.
func TestUnfenceablePrimaryPromotedAfterLeaseAndMargin(t *testing.T) {
	h, hs := healthyGroup(t, func(h *decidetest.Harness) {
		for _, m := range h.Snap.Machines {
			if m.Cluster == "east" {
				m.Provider, m.ProviderKey = decidetest.External, decidetest.External
			}
		}
	})
	east := h.ReplicaByID("pg-east-0").Machine
	lastBeat := h.Now.Add(-time.Second)
	g := h.Snap.FailoverGroups[0].Spec
	deadline := lastBeat.Add(time.Duration(g.LeaseSeconds+g.FenceMarginSeconds) * time.Second)
	for h.Now.Before(deadline) {
		if p := hs.pass(east); len(p.Fences) > 0 || h.Memory.Failover["pg"].Epoch != 1 {
			t.Fatalf("fence call or promotion at %s, before the lease plus margin (%s): %+v", h.Now, deadline, h.Memory.Failover["pg"])
		}
		h.Step(time.Second)
	}
	hs.pass(east)
	if st := h.Memory.Failover["pg"]; st.Epoch != 2 || st.Primary != failover.HomeReplica {
		t.Fatalf("want promoted after the lease plus margin: %+v", st)
	}
	said := false
	for _, e := range h.Events {
		said = said || e.Reason == "FenceUnconfirmed"
	}
	if !said {
		t.Fatal("no FenceUnconfirmed event")
	}
}

// A primary that fails while its machine keeps heartbeating (its
// PostgreSQL crashed, or its member fenced itself) is fenced once its
// lease has run out: heartbeats after the server took the role back renew
// nothing (they used to renew the lease for ever, and the group waited in
// Fencing with the old primary's lease always ahead).
func TestFailedPrimaryOnAHeartbeatingMachineIsFenced(t *testing.T) {
	h, _ := healthyGroup(t, nil)
	fenced := false
	for i := 0; i < 30 && !fenced; i++ {
		h.Join()
		h.Run()
		for _, m := range h.Snap.Machines {
			beat := h.Now
			m.LastHeartbeat = &beat // every machine heartbeats, the primary's too
		}
		h.ReplicaByID("pg-east-0").Health = api.HealthUnhealthy
		p := h.Pass()
		members(h)
		fenced = len(p.Fences) > 0
		h.Step(time.Second)
	}
	if !fenced {
		t.Fatalf("the failed primary was never fenced: %+v", h.Memory.Failover["pg"])
	}
}

// A primary whose machine stops heartbeating while its replica cannot
// take over holds the group's only up-to-date data: its machine is kept
// (not terminated for the silence, its member not rescheduled onto an
// empty machine) and says why, and it serves on when it heartbeats again.
// Found by the fault schedule: a late-heartbeating new primary's machine
// was replaced while the other side was still cloning, and the group had
// no data left to serve.
func TestUnreachablePrimaryWithoutAReadyReplicaIsKept(t *testing.T) {
	h, hs := healthyGroup(t, nil)
	east := h.ReplicaByID("pg-east-0").Machine
	replicaNotReady := func() {
		if r := h.ReplicaByID("pg-west-0"); r != nil {
			r.Health = api.HealthUnhealthy
			if r.Member != nil {
				r.Member.Serving = false
			}
		}
	}
	replicaNotReady()
	for range 60 {
		p := hs.pass(east)
		replicaNotReady()
		if slices.ContainsFunc(p.Terminates, func(x decide.Terminate) bool { return x.Machine == east }) {
			t.Fatalf("at %s the only copy's machine is terminated: %+v (group %+v)", h.Now, p.Terminates, h.Memory.Failover["pg"])
		}
		h.Step(time.Second)
	}
	st := h.Memory.Failover["pg"]
	m := h.MachineByID(east)
	if st.Phase != failover.PhasePrimaryFailed || st.Epoch != 1 || m.UnreachableSince == nil || !strings.Contains(m.Reason, "kept: it holds the only up-to-date copy of failover group pg") {
		t.Fatalf("want the group waiting on its primary's machine, kept and saying so: group %+v, machine %q", st, m.Reason)
	}
	if r := h.ReplicaByID("pg-east-0"); r.Machine != east {
		t.Fatalf("the primary's replica was moved to %s", r.Machine)
	}
	fleet.Heartbeat(h.MachineByID(east), h.Now) // as the server records its agent's next heartbeat
	for range 5 {
		p := hs.pass()
		replicaNotReady()
		if len(p.Terminates) > 0 {
			t.Fatalf("back at %s: terminates %+v (group %+v)", h.Now, p.Terminates, h.Memory.Failover["pg"])
		}
		h.Step(time.Second)
	}
	if m := h.MachineByID(east); m.UnreachableSince != nil || !m.Live() {
		t.Fatalf("the machine heartbeats again but is %+v", m)
	}
	if st := h.Memory.Failover["pg"]; st.Epoch != 1 || st.Primary != failover.HomePrimary {
		t.Fatalf("the primary was not kept: %+v", st)
	}
}

// While the old primary is fenced, the replica about to be promoted holds
// the only up-to-date copy: its machine going silent does not get it
// replaced either (the fault schedule's synchronous seed 11 after the
// first fix).
func TestReplicaBeingPromotedIsKeptWhenItGoesSilent(t *testing.T) {
	h, hs := healthyGroup(t, nil)
	east := h.ReplicaByID("pg-east-0").Machine
	west := h.ReplicaByID("pg-west-0").Machine
	for range 30 {
		if p := hs.pass(east); len(p.Fences) > 0 {
			break
		}
		h.Step(time.Second)
	}
	if st := h.Memory.Failover["pg"]; st.Phase != failover.PhaseFencing || st.Target != failover.HomeReplica {
		t.Fatalf("want east being fenced for west: %+v", st)
	}
	for range 60 {
		p := hs.pass(east, west)
		if slices.ContainsFunc(p.Terminates, func(x decide.Terminate) bool { return x.Machine == west }) {
			t.Fatalf("at %s the machine of the replica being promoted is terminated: %+v (group %+v)", h.Now, p.Terminates, h.Memory.Failover["pg"])
		}
		h.Step(time.Second)
	}
	if m := h.MachineByID(west); m == nil || !strings.Contains(m.Reason, "kept: it holds the only up-to-date copy of failover group pg") {
		t.Fatalf("the replica's machine is not kept, or does not say so: %+v", m)
	}
}
