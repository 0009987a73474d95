package failover_test

import (
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/failover"
)

// fakeSide is a side as a test says it is; it serves in whatever role
// Role gives it, unless down.
type fakeSide struct {
	instance string
	down     bool
	// reports is what the member says it does: role, epoch, serving.
	reports api.MemberStatus
	renewed time.Time
	lease   time.Duration
	fence   failover.FenceState
	// replication is what its software reports of its replication.
	replication *api.ReplicationStatus
}

func (s *fakeSide) Instance() string { return s.instance }
func (s *fakeSide) Healthy(role string, epoch int64) bool {
	return !s.down && s.reports.Role == role && s.reports.Epoch == epoch && s.reports.Serving
}
func (s *fakeSide) Failed() bool { return s.down }
func (s *fakeSide) Stopped(epoch int64) bool {
	return s.reports.Role == api.RoleFenced && !s.reports.Serving && s.reports.Epoch == epoch
}
func (s *fakeSide) LeaseExpiry() time.Time     { return s.renewed.Add(s.lease) }
func (s *fakeSide) Fence() failover.FenceState { return s.fence }
func (s *fakeSide) Replication() *api.ReplicationStatus {
	if s.down {
		return nil
	}
	return s.replication
}

// world runs the state machine against two fake sides and a fake clock;
// the members take the roles they are given at once, like an agent
// delivering them on its next heartbeat.
type world struct {
	t     *testing.T
	g     failover.Group
	st    failover.State
	sides map[string]*fakeSide
	now   time.Time
	// actions and events of every step, for assertions.
	fences []string
	events []string
}

func newWorld(t *testing.T, automatic bool) *world {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	lease := 10 * time.Second
	w := &world{t: t, now: now, st: failover.New(now),
		g: failover.Group{Name: "pg", Automatic: automatic, Lease: lease, FenceMargin: 5 * time.Second},
		sides: map[string]*fakeSide{
			failover.HomePrimary: {instance: "pg-east-0@m1", lease: lease, renewed: now},
			failover.HomeReplica: {instance: "pg-west-0@m2", lease: lease, renewed: now},
		}}
	return w
}

// step runs one pass, then lets each live member take the role it was
// given (and renew its lease) and asserts the invariant: never two
// members told to be primary.
func (w *world) step(request string) {
	w.t.Helper()
	d := failover.Step(w.g, w.st, w.sides, request, w.now)
	w.st = d.State
	for _, a := range d.Actions {
		w.fences = append(w.fences, a.Fence)
	}
	for _, e := range d.Events {
		w.events = append(w.events, e.Reason)
	}
	primaries := 0
	for home, s := range w.sides {
		role, _ := failover.Role(w.st, home, s.instance)
		if role == api.RolePrimary {
			primaries++
		}
		if s.down {
			continue
		}
		s.reports = api.MemberStatus{Role: role, Epoch: w.st.Epoch, Serving: role != api.RoleFenced}
		s.renewed = w.now
	}
	if primaries > 1 {
		w.t.Fatalf("two members told to be primary: %+v", w.st)
	}
}

func (w *world) advance(d time.Duration, passes int) {
	for range passes {
		w.now = w.now.Add(d)
		w.step("")
	}
}

func (w *world) healthy() {
	w.t.Helper()
	w.advance(time.Second, 3)
	if w.st.Phase != failover.PhaseHealthy || !w.st.Initialized {
		w.t.Fatalf("not healthy: %+v", w.st)
	}
}

func TestInitialisesThePrimarySideThenTurnsHealthy(t *testing.T) {
	w := newWorld(t, true)
	w.step("")
	if role, bootstrap := failover.Role(w.st, failover.HomePrimary, "pg-east-0@m1"); role != api.RolePrimary || !bootstrap {
		t.Fatalf("the first primary may bootstrap: %s %v", role, bootstrap)
	}
	w.healthy()
	if _, bootstrap := failover.Role(w.st, failover.HomePrimary, "pg-east-0@m1"); bootstrap {
		t.Fatal("an initialised group never bootstraps again")
	}
}

func TestFailedPrimaryIsFencedBeforeThePromotion(t *testing.T) {
	w := newWorld(t, true)
	w.healthy()
	lastRenewal := w.now
	w.sides[failover.HomePrimary].down = true
	w.advance(time.Second, 1)
	if w.st.Phase != failover.PhaseFencing {
		t.Fatalf("want fencing, got %+v", w.st)
	}
	w.advance(time.Second, 8) // the lease has not run out
	if w.st.Epoch != 1 || len(w.fences) != 0 {
		t.Fatalf("promoted or fenced before the lease ran out: %+v, fences %v", w.st, w.fences)
	}
	w.now = lastRenewal.Add(10 * time.Second)
	w.step("")
	if len(w.fences) != 1 || w.fences[0] != failover.HomePrimary || w.st.Epoch != 1 {
		t.Fatalf("after the lease: fence the primary's machine, not promote yet: %+v, fences %v", w.st, w.fences)
	}
	w.sides[failover.HomePrimary].fence = failover.FenceConfirmed
	w.advance(time.Second, 1)
	if w.st.Epoch != 2 || w.st.Primary != failover.HomeReplica || w.st.LastFailover == nil {
		t.Fatalf("want the replica promoted at epoch 2: %+v", w.st)
	}
	w.advance(time.Second, 1)
	if w.st.Phase != failover.PhaseDegraded {
		t.Fatalf("the old side is down: want degraded, got %+v", w.st)
	}
	// The old side comes back on a new machine: a replica, never primary.
	w.sides[failover.HomePrimary] = &fakeSide{instance: "pg-east-0@m3", lease: w.g.Lease, renewed: w.now}
	w.advance(time.Second, 2)
	if role, _ := failover.Role(w.st, failover.HomePrimary, "pg-east-0@m3"); role != api.RoleReplica || w.st.Phase != failover.PhaseHealthy {
		t.Fatalf("the old side must come back as a replica: %s, %+v", role, w.st)
	}
	want := []string{"PrimaryFailed", "Promoted", "PrimaryServing"}
	for _, reason := range want {
		if !contains(w.events, reason) {
			t.Fatalf("events %v lack %s", w.events, reason)
		}
	}
}

func TestUnfenceableMachineWaitsTheLeasePlusTheMargin(t *testing.T) {
	w := newWorld(t, true)
	w.healthy()
	w.sides[failover.HomePrimary].down = true
	w.sides[failover.HomePrimary].fence = failover.FenceUnsupported
	expiry := w.sides[failover.HomePrimary].LeaseExpiry()
	w.advance(time.Second, 1)
	w.now = expiry.Add(4 * time.Second)
	w.step("")
	if w.st.Epoch != 1 {
		t.Fatalf("promoted within the margin: %+v", w.st)
	}
	w.now = expiry.Add(5 * time.Second)
	w.step("")
	if w.st.Epoch != 2 {
		t.Fatalf("want promoted after lease plus margin: %+v", w.st)
	}
}

func TestManualModeWaitsForPromote(t *testing.T) {
	w := newWorld(t, false)
	w.healthy()
	w.sides[failover.HomePrimary].down = true
	w.advance(time.Minute, 3)
	if w.st.Phase != failover.PhasePrimaryFailed || w.st.Epoch != 1 {
		t.Fatalf("manual mode must wait: %+v", w.st)
	}
	w.step(api.FailoverPromote)
	if w.st.Phase != failover.PhaseFencing {
		t.Fatalf("promote of a failed primary fences it: %+v", w.st)
	}
	w.sides[failover.HomePrimary].fence = failover.FenceConfirmed
	w.advance(time.Second, 1)
	if w.st.Epoch != 2 {
		t.Fatalf("want promoted: %+v", w.st)
	}
}

func TestSwitchoverWaitsForThePrimaryToStop(t *testing.T) {
	w := newWorld(t, true)
	w.healthy()
	east := w.sides[failover.HomePrimary]
	d := failover.Step(w.g, w.st, w.sides, api.FailoverPromote, w.now)
	w.st = d.State
	if w.st.Phase != failover.PhaseSwitchover {
		t.Fatalf("want switchover, got %+v", w.st)
	}
	if role, _ := failover.Role(w.st, failover.HomePrimary, east.instance); role != api.RoleFenced {
		t.Fatalf("the primary must stop first, told %s", role)
	}
	// It has not stopped yet: nothing is promoted.
	w.now = w.now.Add(time.Second)
	w.st = failover.Step(w.g, w.st, w.sides, "", w.now).State
	if w.st.Epoch != 1 {
		t.Fatalf("promoted before the primary stopped: %+v", w.st)
	}
	w.step("") // it takes the fenced role and reports it stopped
	w.advance(time.Second, 3)
	if w.st.Epoch != 2 || w.st.Primary != failover.HomeReplica || w.st.Phase != failover.PhaseHealthy {
		t.Fatalf("want west primary and healthy: %+v", w.st)
	}
	w.step(api.FailoverRevert)
	w.advance(time.Second, 4)
	if w.st.Epoch != 3 || w.st.Primary != failover.HomePrimary || w.st.Phase != failover.PhaseHealthy {
		t.Fatalf("want reverted to east: %+v", w.st)
	}
}

func TestRequestsRefusedWhenTheReplicaIsNotReady(t *testing.T) {
	w := newWorld(t, true)
	w.healthy()
	w.sides[failover.HomeReplica].down = true
	w.step(api.FailoverPromote)
	if w.st.Epoch != 1 || w.st.Phase == failover.PhaseSwitchover || !contains(w.events, "RequestRefused") {
		t.Fatalf("promote without a ready replica must be refused: %+v %v", w.st, w.events)
	}
	w.step(api.FailoverRevert)
	if !contains(w.events, "RevertIgnored") {
		t.Fatalf("revert while the spec's primary is primary: %v", w.events)
	}
}

func TestANewInstanceOfThePrimarySideNeverTakesTheRole(t *testing.T) {
	w := newWorld(t, false)
	w.healthy()
	// The primary's replica is placed again elsewhere (its machine was
	// lost): the newcomer has no claim to the role.
	w.sides[failover.HomePrimary].instance = "pg-east-0@m9"
	w.step("")
	if role, _ := failover.Role(w.st, failover.HomePrimary, "pg-east-0@m9"); role == api.RolePrimary {
		t.Fatalf("a new instance took the primary role: %+v", w.st)
	}
	if w.st.Phase != failover.PhasePrimaryFailed {
		t.Fatalf("want the primary counted as failed: %+v", w.st)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestSwitchoverAbortsWhenTheReplicaFails(t *testing.T) {
	w := newWorld(t, true)
	w.healthy()
	w.step(api.FailoverPromote)
	w.sides[failover.HomeReplica].down = true
	w.advance(time.Second, 2)
	if w.st.Epoch != 1 || w.st.Primary != failover.HomePrimary || !contains(w.events, "SwitchoverAborted") {
		t.Fatalf("a switchover to a failed replica must abort: %+v %v", w.st, w.events)
	}
	if role, _ := failover.Role(w.st, failover.HomePrimary, "pg-east-0@m1"); role != api.RolePrimary {
		t.Fatalf("the primary takes its role back, told %s", role)
	}
}
