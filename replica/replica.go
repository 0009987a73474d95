// Package replica owns a replica's state: where it is placed, and what its
// agent (or, later, its pod) reports of it. The control loop's decisions
// and the status ingestion call these functions; nothing else writes a
// replica's placement or state.
package replica

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"github.com/gantry-dev/gantry/api"
)

// moves are the allowed state transitions. Any state may go back to
// pending (its machine went away, it was preempted, its resources
// changed); only a pending replica is assigned; the rest is what its
// agent observes. A Pod's replica is watched from the moment it is
// placed: its Pod waits for a node in pending and may leave it for any
// state its pod watch reports, including exited and unknown.
var moves = map[api.ReplicaState][]api.ReplicaState{
	api.ReplicaPending:  {api.ReplicaPending, api.ReplicaAssigned},
	api.ReplicaAssigned: {api.ReplicaPending, api.ReplicaAssigned, api.ReplicaStarting, api.ReplicaRunning, api.ReplicaCrashed, api.ReplicaFailed},
	api.ReplicaStarting: {api.ReplicaPending, api.ReplicaStarting, api.ReplicaRunning, api.ReplicaCrashed, api.ReplicaFailed},
	api.ReplicaRunning:  {api.ReplicaPending, api.ReplicaStarting, api.ReplicaRunning, api.ReplicaCrashed, api.ReplicaFailed},
	api.ReplicaCrashed:  {api.ReplicaPending, api.ReplicaStarting, api.ReplicaRunning, api.ReplicaCrashed, api.ReplicaFailed},
	api.ReplicaFailed:   {api.ReplicaPending, api.ReplicaStarting, api.ReplicaRunning, api.ReplicaCrashed, api.ReplicaFailed},
}

// podStates are the states a pod watch reports; a Pod's replica moves
// between any two of them.
var podStates = []api.ReplicaState{api.ReplicaPending, api.ReplicaStarting, api.ReplicaRunning, api.ReplicaCrashed,
	api.ReplicaFailed, api.ReplicaExited, api.ReplicaUnknown}

func check(r *api.Replica, to api.ReplicaState) error {
	if r.Pod != "" && slices.Contains(podStates, r.State) && slices.Contains(podStates, to) {
		return nil
	}
	allowed, known := moves[r.State]
	if !known {
		return fmt.Errorf("replica %s: unknown state %q", r.ID, r.State)
	}
	if !slices.Contains(allowed, to) {
		return fmt.Errorf("replica %s: state %s → %s is not allowed", r.ID, r.State, to)
	}
	return nil
}

// New is replica index of a service, pending.
func New(id, service, cluster string, index int, specHash string, requests api.Resources, now time.Time) *api.Replica {
	return &api.Replica{ID: id, Service: service, Cluster: cluster, Index: index, State: api.ReplicaPending,
		SpecHash: specHash, Requests: requests, UpdatedAt: now.UTC()}
}

// Retire takes a replica out of its service's name: it runs on until its
// service's drain time has passed, then the control loop deletes it (and
// makes its index again when the service still wants it). False when it
// retires already.
func Retire(r *api.Replica, why string, now time.Time) bool {
	if r.RetiringSince != nil {
		return false
	}
	at := now.UTC()
	r.RetiringSince, r.RetireReason = &at, why
	return true
}

// ID names the i-th replica of a service.
func ID(service string, i int) string { return fmt.Sprintf("%s-%d", service, i) }

// NamedInService: r's id begins with its service's name and a dash, as
// every id ID makes does; the store's order (by service and id) is then
// one a replica is found in by its id alone.
func NamedInService(r *api.Replica) bool {
	n := len(r.Service)
	return len(r.ID) > n && r.ID[n] == '-' && r.ID[:n] == r.Service
}

// ToPending sends a replica back to the scheduler: nothing of its old
// placement stays (machine, GPUs, runtime class, ports, address, health).
// A copy still running on a machine it was moving off stays there until
// the caller clears PreviousMachine.
func ToPending(r *api.Replica, why string, now time.Time) {
	r.Machine, r.State, r.Reason, r.Health = "", api.ReplicaPending, why, ""
	r.HostPorts, r.Address, r.GPUIndexes, r.RuntimeClass, r.Note = nil, "", nil, "", ""
	r.Pod, r.Node, r.Member, r.UpdatedAt = "", "", nil, now.UTC()
}

// Placement is where the scheduler put a replica.
type Placement struct {
	Machine string
	// Address is the machine's first address, where the replica answers.
	Address string
	GPUs    []int
	TEE     bool
	Note    string
	// Pod places the replica as a Pod (namespace/name) on a Kubernetes
	// cluster instead of on a machine.
	Pod string
}

// Assign places a pending replica. A replica still on a draining (or
// otherwise leaving) machine moves: its old copy keeps running there as
// PreviousMachine until the new one runs.
func Assign(r *api.Replica, p Placement, moving bool, now time.Time) error {
	if moving {
		if r.Machine == "" || r.PreviousMachine != "" {
			return fmt.Errorf("replica %s: cannot move from %q (already moving from %q)", r.ID, r.Machine, r.PreviousMachine)
		}
		r.PreviousMachine = r.Machine
		if r.State == api.ReplicaRunning && r.Address != "" {
			r.PreviousAddress, r.PreviousPorts = r.Address, r.HostPorts
		}
		r.State = api.ReplicaPending // the new copy starts from nothing
	} else if r.Machine != "" || r.Pod != "" {
		return fmt.Errorf("replica %s: already placed on %s%s", r.ID, r.Machine, r.Pod)
	}
	if err := check(r, api.ReplicaAssigned); err != nil {
		return err
	}
	if !moving {
		// The old copy of a moving replica keeps its incarnation until the
		// new one runs; reports are told apart by their machine meanwhile.
		r.Incarnation = strconv.FormatInt(now.UnixNano(), 36)
	}
	r.Machine, r.Pod, r.State, r.Reason, r.UpdatedAt = p.Machine, p.Pod, api.ReplicaAssigned, "", now.UTC()
	r.GPUIndexes, r.Note, r.RuntimeClass, r.Address = slices.Clone(p.GPUs), p.Note, "", p.Address
	r.Health, r.HostPorts, r.Member = "", nil, nil
	if p.TEE {
		r.RuntimeClass = "tee"
	}
	return nil
}

// SetPending records why an unplaced replica waits; it reports whether the
// reason changed.
func SetPending(r *api.Replica, why string, now time.Time) bool {
	if r.Machine != "" || r.Pod != "" || (r.Reason == why && r.State == api.ReplicaPending) {
		return false
	}
	r.State, r.Reason, r.UpdatedAt = api.ReplicaPending, why, now.UTC()
	return true
}

// Change is what an observation did to a replica.
type Change struct {
	// Changed: something the store keeps changed.
	Changed bool
	// From is the state before, when the state changed.
	From api.ReplicaState
	// HandedOver: the copy on the machine it moved to runs; the one on
	// PreviousMachine (named here) stops.
	HandedOver string
}

// StateChanged reports whether the observation moved the state.
func (c Change) StateChanged() bool { return c.From != "" }

// Observe applies what the replica's runner (agent, pod) reports of it.
func Observe(r *api.Replica, st api.ReplicaStatus, address string, now time.Time) (Change, error) {
	var c Change
	handover := r.PreviousMachine != "" && r.HandedOverAt == nil && st.State == api.ReplicaRunning && st.Health != api.HealthUnhealthy
	if r.State == st.State && r.Health == st.Health && r.Restarts == st.Restarts && r.Reason == st.Message &&
		maps.Equal(r.HostPorts, st.HostPorts) && (address == "" || r.Address == address) && r.Node == st.Node && !handover &&
		memberEqual(r.Member, st.Member) {
		return c, nil
	}
	if err := check(r, st.State); err != nil {
		return c, err
	}
	if r.State != st.State {
		c.From = r.State
	}
	r.State, r.Health, r.Restarts, r.Reason, r.HostPorts, r.UpdatedAt = st.State, st.Health, st.Restarts, st.Message, st.HostPorts, now.UTC()
	r.Node, r.Member = st.Node, st.Member
	if address != "" {
		r.Address = address
	}
	if handover {
		// The old copy leaves the endpoints now and stops once drained.
		c.HandedOver = r.PreviousMachine
		at := now.UTC()
		r.HandedOverAt = &at
	}
	c.Changed = true
	return c, nil
}

// EndMove forgets the copy a replica was moving off (it stops).
func EndMove(r *api.Replica) {
	r.PreviousMachine, r.PreviousAddress, r.PreviousPorts, r.HandedOverAt = "", "", nil, nil
}

// Draining reports whether a replica's old copy, handed over, is
// draining on PreviousMachine.
func Draining(r *api.Replica) bool { return r.PreviousMachine != "" && r.HandedOverAt != nil }

// Available reports whether a replica runs and passes its health check
// (where it has one).
func Available(r *api.Replica) bool {
	return r.State == api.ReplicaRunning && r.Health != api.HealthUnhealthy && (r.PreviousMachine == "" || r.HandedOverAt != nil)
}

// Report is what the runner of some replicas observed of them: an agent
// (through its heartbeat) for the replicas assigned to its machine; later,
// a pod watch for a Kubernetes cluster's.
type Report struct {
	// Holder runs the replicas (a machine id).
	Holder string
	// Address is where they answer (the machine's first address).
	Address string
	// Subnet is the holder's /24: a replica whose placement gave it an
	// address of its own there (an overlay) keeps it.
	Subnet   string
	Statuses []api.ReplicaStatus
}

// ownAddress: addr lies in subnet (a replica's own overlay address).
func ownAddress(addr, subnet string) bool {
	a, err1 := netip.ParseAddr(addr)
	p, err2 := netip.ParsePrefix(subnet)
	return err1 == nil && err2 == nil && p.Contains(a)
}

// Applied is one replica a report changed.
type Applied struct {
	Replica *api.Replica
	Change  Change
}

// Apply applies a report to the replicas its holder holds; statuses of
// replicas held elsewhere (or gone), or of another incarnation or
// revision under the same id (an old process's last words), are ignored.
func Apply(held []*api.Replica, rep Report, now time.Time) ([]Applied, error) {
	byID := map[string]*api.Replica{}
	for _, r := range held {
		byID[r.ID] = r
	}
	var out []Applied
	for _, st := range rep.Statuses {
		r, ok := byID[st.ReplicaID]
		if !ok || differs(st.Incarnation, r.Incarnation) || differs(st.SpecHash, r.SpecHash) {
			continue
		}
		address := rep.Address
		if ownAddress(r.Address, rep.Subnet) {
			address = ""
		}
		c, err := Observe(r, st, address, now)
		if err != nil {
			return nil, err
		}
		if c.Changed {
			out = append(out, Applied{Replica: r, Change: c})
		}
	}
	return out, nil
}

// differs: both are known and not the same (a runner that does not echo
// a field cannot be judged by it).
func differs(reported, recorded string) bool {
	return reported != "" && recorded != "" && reported != recorded
}

func memberEqual(a, b *api.MemberStatus) bool {
	if a == nil || b == nil {
		return a == b
	}
	ra, rb := a.Replication, b.Replication
	if (ra == nil) != (rb == nil) || ra != nil && *ra != *rb {
		return false
	}
	x, y := *a, *b
	x.Replication, y.Replication = nil, nil
	return x == y
}
