// Package failover is the orchestration of a failover group, written once
// for any target and any capability: a pure state machine over two Sides
// (what a target observes of each member), a clock and the group's
// durable State. It decides roles, fencing and promotion; targets carry
// out fencing (package decide, for machines) and members carry out their
// role through a Capability (package failover/member).
//
// A group is primary in one side and replica in the other. When the
// primary fails, it is fenced — its lease must run out (its agent stops
// it before then) and its machine must be confirmed stopped through the
// provider, or, when the provider cannot stop it, a margin must pass —
// and only then is the replica promoted, with a new epoch. A planned
// switchover (manual promote, revert) first has the primary stop itself
// and report it, so no acknowledged write is lost.
package failover

import (
	"fmt"
	"time"

	"github.com/gantry-dev/gantry/api"
)

// Homes: each side is named by the role the spec gives it.
const (
	HomePrimary = "primary"
	HomeReplica = "replica"
)

// Phases of a group.
const (
	PhaseInitializing  = "Initializing"
	PhaseHealthy       = "Healthy"
	PhaseDegraded      = "Degraded"
	PhasePrimaryFailed = "PrimaryFailed"
	PhaseFencing       = "Fencing"
	PhaseSwitchover    = "SwitchingOver"
	PhasePromoting     = "Promoting"
)

// FenceState is how far fencing a side's machine has come.
type FenceState int

// Fence states.
const (
	// FenceNotRequested: no fence asked for yet.
	FenceNotRequested FenceState = iota
	FencePending
	// FenceConfirmed: the provider stopped or terminated the machine and
	// Describe confirmed it.
	FenceConfirmed
	// FenceUnsupported: the target cannot stop the machine; only the
	// lease (plus a margin) fences it.
	FenceUnsupported
)

// Side is one member of a group as a target observes it.
type Side interface {
	// Instance identifies what runs the side now ("" when nothing is
	// placed): a new instance never inherits the primary role.
	Instance() string
	// Healthy: running, passing its health checks, and reporting that it
	// serves in role at epoch.
	Healthy(role string, epoch int64) bool
	// Failed: not running, failing its health checks, or its machine lost.
	Failed() bool
	// Stopped: it reports it does not serve, in role fenced at epoch.
	Stopped(epoch int64) bool
	// LeaseExpiry is when its primary lease has run out at the latest.
	LeaseExpiry() time.Time
	// Fence is how far fencing its machine has come.
	Fence() FenceState
	// Replication is what its software last reported of its replication
	// (nil: nothing, or a capability that does not report).
	Replication() *api.ReplicationStatus
}

// Group is what the orchestration needs of a group's spec.
type Group struct {
	Name string
	// Sides name each home in events (its cluster).
	Sides       map[string]string
	Automatic   bool
	Lease       time.Duration
	FenceMargin time.Duration
	// Data is the rule an automatic failover keeps so as not to lose
	// acknowledged writes (the postgres capability's).
	Data DataRule
}

// DataRule: when Enforced, an automatic failover promotes only a replica
// that was the synchronous standby as of the primary's last report
// (Synchronous), or within MaximumLag bytes of the primary's last
// reported position (asynchronous).
type DataRule struct {
	Enforced    bool
	Synchronous bool
	MaximumLag  uint64
}

// State is a group's durable memory.
type State struct {
	Phase string `json:"phase"`
	Epoch int64  `json:"epoch"`
	// Primary is the home of the side that is primary; Holder the
	// instance that holds the role there.
	Primary string `json:"primary"`
	Holder  string `json:"holder,omitempty"`
	// Target is the side being promoted (Fencing, SwitchingOver,
	// Promoting).
	Target      string `json:"target,omitempty"`
	Initialized bool   `json:"initialized,omitempty"`
	// FenceMachine is the machine being fenced, FenceConfirmed whether the
	// provider confirmed it stopped; FenceError the last failure.
	FenceMachine   string     `json:"fenceMachine,omitempty"`
	FenceTried     *time.Time `json:"fenceTried,omitempty"`
	FenceConfirmed bool       `json:"fenceConfirmed,omitempty"`
	FenceError     string     `json:"fenceError,omitempty"`
	// SyncStandby is the instance the primary last reported every commit
	// waits for ("" none), SyncStandbyName its name there; PrimaryPosition
	// the primary's last reported WAL position. They outlive the primary:
	// what they say of its last report decides whether a failover may
	// promote without losing acknowledged writes.
	SyncStandby     string `json:"syncStandby,omitempty"`
	SyncStandbyName string `json:"syncStandbyName,omitempty"`
	PrimaryPosition uint64 `json:"primaryPosition,omitempty"`
	// AcceptDataLoss: a manual promote that may lose writes (the replica
	// was not synchronous) was asked for.
	AcceptDataLoss bool `json:"acceptDataLoss,omitempty"`
	// Renewed is when the holder's lease was last known renewed.
	Renewed      time.Time  `json:"renewed"`
	Since        time.Time  `json:"since"`
	LastFailover *time.Time `json:"lastFailover,omitempty"`
	Message      string     `json:"message,omitempty"`
}

// New is the state of a new group.
func New(now time.Time) State {
	return State{Phase: PhaseInitializing, Epoch: 1, Primary: HomePrimary, Since: now}
}

// Other is the other side's home.
func Other(home string) string {
	if home == HomePrimary {
		return HomeReplica
	}
	return HomePrimary
}

// Action is what a target must do for the group.
type Action struct {
	// Fence: stop the side's machine through its provider and confirm.
	Fence string
}

// Event explains a step.
type Event struct {
	Warning bool
	Reason  string
	Message string
}

// Decision is one step's outcome.
type Decision struct {
	State   State
	Actions []Action
	Events  []Event
	// Wake is the earliest time the step could decide otherwise with its
	// sides as they are (zero: not before they change).
	Wake time.Time
}

// Role is what the instance of a side must do now, and whether a primary
// without data may initialise it.
func Role(st State, home, instance string) (role string, bootstrap bool) {
	switch {
	case instance == "":
		return api.RoleFenced, false
	case home == st.Primary && (st.Phase == PhaseFencing || st.Phase == PhaseSwitchover):
		return api.RoleFenced, false
	case home == st.Primary && instance == st.Holder:
		return api.RolePrimary, !st.Initialized
	case home == st.Primary:
		// A new instance where the primary was: it has no claim to the
		// role and waits for the other side to take it.
		return api.RoleFenced, false
	}
	return api.RoleReplica, false
}

// Step decides one pass for a group. request is a manual step asked for
// ("", promote, revert).
func Step[S Side](g Group, st State, sides map[string]S, request string, now time.Time) Decision {
	d := &stepper[S]{g: g, st: st, sides: sides, now: now}
	d.step(request)
	return Decision{State: d.st, Actions: d.actions, Events: d.events, Wake: d.wake}
}

type stepper[S Side] struct {
	g       Group
	st      State
	sides   map[string]S
	now     time.Time
	actions []Action
	events  []Event
	wake    time.Time
}

// before reports whether now is before t, and if so notes that the step
// may decide otherwise at t.
func (d *stepper[S]) before(t time.Time) bool {
	if !d.now.Before(t) {
		return false
	}
	if d.wake.IsZero() || t.Before(d.wake) {
		d.wake = t
	}
	return true
}

func (d *stepper[S]) step(request string) {
	d.recordReplication()
	switch d.st.Phase {
	case PhaseInitializing:
		d.initialize()
	case PhaseFencing:
		d.fence()
	case PhaseSwitchover:
		d.switchover()
	case PhasePromoting:
		d.promoting()
	default:
		d.watch(request)
	}
}

func (d *stepper[S]) primary() S { return d.sides[d.st.Primary] }
func (d *stepper[S]) replica() S { return d.sides[Other(d.st.Primary)] }

func (d *stepper[S]) to(phase, why string) {
	if d.st.Phase == phase && d.st.Message == why {
		return
	}
	d.st.Phase, d.st.Message, d.st.Since = phase, why, d.now
}

// side names a home for events.
func (d *stepper[S]) side(home string) string {
	if name := d.g.Sides[home]; name != "" {
		return name
	}
	return home + " side"
}

func (d *stepper[S]) event(warning bool, reason, format string, args ...any) {
	d.events = append(d.events, Event{Warning: warning, Reason: reason, Message: fmt.Sprintf(format, args...)})
}

// initialize gives the role to the home primary's first instance; the
// group is initialised once it serves.
func (d *stepper[S]) initialize() {
	p := d.primary()
	if !d.st.Initialized {
		d.st.Holder = p.Instance() // before it ever served, any instance may bootstrap
		if d.st.Holder != "" && p.Healthy(api.RolePrimary, d.st.Epoch) {
			d.st.Initialized = true
			d.event(false, "PrimaryServing", "%s serves as primary (epoch %d)", d.side(d.st.Primary), d.st.Epoch)
		}
		return
	}
	d.watch("")
}

// watch follows a group with a primary: a failed primary is fenced and
// replaced (automatic mode) or reported (manual); requests start a
// switchover or a manual failover.
func (d *stepper[S]) watch(request string) {
	p, r := d.primary(), d.replica()
	replicaReady := r.Healthy(api.RoleReplica, d.st.Epoch)
	primaryLost := p.Failed() || p.Instance() != d.st.Holder
	promotable, notPromotable := d.promotable(r)
	switch {
	case request == api.FailoverRevert && d.st.Primary == HomePrimary:
		d.event(true, "RevertIgnored", "the primary side is primary already")
	case request != "" && !replicaReady:
		d.event(true, "RequestRefused", "%s refused: %s is not a healthy replica", request, d.side(Other(d.st.Primary)))
	case request != "" && !promotable && request != api.FailoverPromoteAcceptDataLoss:
		d.event(true, "RequestRefused", "%s refused: %s; `gantry failover promote --accept-data-loss` promotes it anyway, losing those writes", request, notPromotable)
	case request != "" && primaryLost:
		d.st.AcceptDataLoss = request == api.FailoverPromoteAcceptDataLoss
		d.startFence(fmt.Sprintf("manual %s of a failed primary", request))
		return
	case request != "":
		d.st.Target = Other(d.st.Primary)
		d.to(PhaseSwitchover, "planned switchover ("+request+"): the primary stops, then the replica is promoted")
		d.event(false, "SwitchoverStarted", "%s: %s stops serving, then %s is promoted", request, d.side(d.st.Primary), d.side(d.st.Target))
		return
	}
	switch {
	case primaryLost && d.g.Automatic && replicaReady && promotable:
		d.startFence("primary failed")
	case primaryLost && d.g.Automatic && replicaReady:
		why := "primary failed; not promoting the replica: " + notPromotable + " (`gantry failover promote --accept-data-loss` promotes it anyway)"
		if d.st.Phase != PhasePrimaryFailed || d.st.Message != why {
			d.event(true, "NotPromoting", "%s", why)
		}
		d.to(PhasePrimaryFailed, why)
	case primaryLost:
		why := "primary failed; waiting for `gantry failover promote`"
		if !replicaReady {
			why = "primary failed and the replica is not ready"
		}
		if d.st.Phase != PhasePrimaryFailed {
			d.event(true, "PrimaryFailed", "%s", why)
		}
		d.to(PhasePrimaryFailed, why)
	case !replicaReady:
		if d.st.Phase != PhaseDegraded {
			d.event(true, "ReplicaNotReady", "%s is not a healthy replica", d.side(Other(d.st.Primary)))
		}
		d.to(PhaseDegraded, "the replica is not ready")
	default:
		if d.st.Phase != PhaseHealthy {
			d.event(false, "Healthy", "primary in %s, replica in %s", d.side(d.st.Primary), d.side(Other(d.st.Primary)))
		}
		d.to(PhaseHealthy, "")
	}
}

func (d *stepper[S]) startFence(why string) {
	d.st.Target = Other(d.st.Primary)
	d.st.FenceMachine, d.st.FenceConfirmed, d.st.FenceError = "", false, ""
	d.to(PhaseFencing, why+": fencing the old primary before promoting the replica")
	d.event(true, "PrimaryFailed", "%s: fencing %s (lease %s), then promoting %s", why, d.side(d.st.Primary), d.g.Lease, d.side(d.st.Target))
}

// fence waits until the old primary cannot serve: its lease ran out and
// its machine is confirmed stopped (or, when that cannot be, a margin
// passed as well). Then the replica is promoted.
func (d *stepper[S]) fence() {
	old, target := d.primary(), d.sides[d.st.Target]
	expiry := old.LeaseExpiry()
	if d.before(expiry) {
		d.st.Message = "waiting for the old primary's lease to expire at " + expiry.UTC().Format(time.RFC3339Nano)
		return
	}
	switch old.Fence() {
	case FenceConfirmed:
	case FenceUnsupported:
		if d.before(expiry.Add(d.g.FenceMargin)) {
			d.st.Message = "the old primary's machine cannot be stopped through its provider: waiting the lease plus a margin"
			return
		}
		if target.Healthy(api.RoleReplica, d.st.Epoch) {
			d.event(true, "FenceUnconfirmed", "the old primary's machine cannot be stopped through its provider: promoting after its lease plus %s", d.g.FenceMargin)
		}
	default:
		d.actions = append(d.actions, Action{Fence: d.st.Primary})
		d.st.Message = "waiting for the provider to confirm the old primary's machine stopped"
		return
	}
	if !target.Healthy(api.RoleReplica, d.st.Epoch) {
		d.st.Message = "old primary fenced; waiting for the replica to be healthy before promoting it"
		return
	}
	if ok, why := d.promotable(target); !ok {
		d.st.Message = "old primary fenced; not promoting the replica: " + why
		return
	}
	how := "failover"
	if rep := target.Replication(); d.g.Data.Enforced && !d.g.Data.Synchronous && rep != nil {
		lag := uint64(0)
		if d.st.PrimaryPosition > rep.ReceivedPosition {
			lag = d.st.PrimaryPosition - rep.ReceivedPosition
		}
		// Asynchronous: what the replica lacked is lost; say how much.
		how = fmt.Sprintf("failover (asynchronous: the replica was %d bytes behind the primary's last report; writes after that report may be lost)", lag)
	}
	d.promote(how)
}

// recordReplication keeps what the serving primary reports: the standby
// its commits wait for, and its WAL position. Only a primary that serves
// in its role at this epoch is believed.
func (d *stepper[S]) recordReplication() {
	if !d.g.Data.Enforced || d.st.Phase == PhaseFencing || d.st.Phase == PhasePromoting {
		return
	}
	p, r := d.primary(), d.replica()
	rep := p.Replication()
	if rep == nil || p.Instance() != d.st.Holder || !p.Healthy(api.RolePrimary, d.st.Epoch) {
		return
	}
	d.st.PrimaryPosition = rep.FlushPosition
	sync, name := "", ""
	switch standby := r.Replication(); {
	case rep.SyncStandby == "" || r.Instance() == "":
	case standby != nil && standby.Name == rep.SyncStandby:
		sync, name = r.Instance(), rep.SyncStandby
	case standby == nil && rep.SyncStandby == d.st.SyncStandbyName && r.Instance() == d.st.SyncStandby:
		// The primary still waits for the standby it named before; the
		// standby's own report is missing this time (a health check that
		// timed out): the record stands.
		sync, name = d.st.SyncStandby, d.st.SyncStandbyName
	}
	if sync != d.st.SyncStandby {
		if sync == "" {
			d.event(true, "SynchronousStandbyLost", "%s no longer waits for %s: it acknowledges writes alone, and an automatic failover will not promote %s until it is synchronous again",
				d.side(d.st.Primary), d.side(Other(d.st.Primary)), d.side(Other(d.st.Primary)))
		} else {
			d.event(false, "SynchronousStandby", "every commit of %s now waits for %s", d.side(d.st.Primary), d.side(Other(d.st.Primary)))
		}
	}
	d.st.SyncStandby, d.st.SyncStandbyName = sync, name
}

// promotable says whether promoting target loses no acknowledged write,
// by what the primary last reported, or why not.
func (d *stepper[S]) promotable(target S) (bool, string) {
	switch {
	case !d.g.Data.Enforced || d.st.AcceptDataLoss:
		return true, ""
	case d.g.Data.Synchronous && (d.st.SyncStandby == "" || target.Instance() != d.st.SyncStandby):
		return false, d.side(Other(d.st.Primary)) + " was not the synchronous standby as of the primary's last report (writes acknowledged since may be missing)"
	case d.g.Data.Synchronous:
		return true, ""
	}
	rep := target.Replication()
	if rep == nil {
		return false, d.side(Other(d.st.Primary)) + " has not reported its WAL position"
	}
	if rep.ReceivedPosition < d.st.PrimaryPosition && d.st.PrimaryPosition-rep.ReceivedPosition > d.g.Data.MaximumLag {
		return false, fmt.Sprintf("%s was %d bytes behind the primary's last report (limit %d)", d.side(Other(d.st.Primary)), d.st.PrimaryPosition-rep.ReceivedPosition, d.g.Data.MaximumLag)
	}
	return true, ""
}

// switchover waits for the primary to report it stopped serving, then
// promotes; a primary that fails meanwhile is fenced like any other.
func (d *stepper[S]) switchover() {
	old := d.primary()
	switch {
	case !d.sides[d.st.Target].Healthy(api.RoleReplica, d.st.Epoch):
		// The replica failed meanwhile: the primary takes its role back.
		d.st.Target = ""
		d.event(true, "SwitchoverAborted", "%s is no longer a healthy replica; %s stays primary", d.side(Other(d.st.Primary)), d.side(d.st.Primary))
		d.to(PhaseDegraded, "switchover aborted: the replica failed")
		d.watch("")
	case old.Stopped(d.st.Epoch):
		d.promote("switchover")
	case old.Failed() || old.Instance() != d.st.Holder:
		d.startFence("primary failed during the switchover")
	}
}

func (d *stepper[S]) promote(how string) {
	from := d.st.Primary
	d.st.Epoch++
	d.st.Primary, d.st.Holder = d.st.Target, d.sides[d.st.Target].Instance()
	d.st.FenceMachine, d.st.FenceConfirmed, d.st.FenceError = "", false, ""
	d.st.SyncStandby, d.st.SyncStandbyName, d.st.PrimaryPosition, d.st.AcceptDataLoss = "", "", 0, false
	now := d.now
	d.st.LastFailover = &now
	d.to(PhasePromoting, d.side(d.st.Primary)+" is being promoted")
	d.event(false, "Promoted", "%s: %s promoted to primary at epoch %d (was %s)", how, d.side(d.st.Primary), d.st.Epoch, d.side(from))
}

func (d *stepper[S]) promoting() {
	if d.primary().Instance() != d.st.Holder || d.primary().Failed() && !d.before(d.st.Since.Add(d.g.Lease).Add(time.Nanosecond)) {
		d.watch("")
		return
	}
	if d.primary().Healthy(api.RolePrimary, d.st.Epoch) {
		d.st.Target = ""
		d.event(false, "PrimaryServing", "%s serves as primary (epoch %d)", d.side(d.st.Primary), d.st.Epoch)
		d.st.Phase = PhaseDegraded // watch reports Healthy once the other side replicates
		d.watch("")
	}
}
