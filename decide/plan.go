package decide

import (
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/planner"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/replica"
)

// Plan is what one pass decided: a plain value. The act step carries it
// out, store writes first (in one transaction), then provider calls.
type Plan struct {
	// Booked is what the pass booked on its machines, for the next pass
	// (Snapshot.Booked); it decides nothing.
	Booked *Booking `json:"-"`
	// Replicas to create and to delete.
	CreateReplicas []*api.Replica
	DeleteReplicas []ReplicaDelete
	// RetireReplicas take serving replicas out of their names; they are
	// deleted once drained.
	RetireReplicas []ReplicaDelete
	// EndMoves stop the old copies of moved replicas that have drained
	// since their handover (replica ids).
	EndMoves []string
	// Reverts return services whose deployment failed to their last good
	// revision.
	Reverts []Revert

	// Launches are new machines: the act step records each intent (with
	// a fresh id and /24), then calls the provider.
	Launches []Launch
	// LaunchCalls are recorded intents whose provider call must be sent
	// (again): the launch key makes a repeat harmless.
	LaunchCalls []string
	// Starts and Stops move warm-pool machines.
	Starts []MachineStep
	Stops  []MachineStep
	Drains []Drain
	// Terminates mark machines terminating (their replicas go back to
	// pending); TerminateCalls are terminating machines whose instance to
	// terminate now.
	Terminates     []Terminate
	TerminateCalls []string
	// Unreachable marks machines that stopped heartbeating.
	Unreachable []MachineStep
	// Describes are machines to look up at their provider; Lists provider
	// keys whose tagged instances to list.
	Describes []string
	Lists     []string
	// Fences stop failed primaries' machines and confirm it.
	Fences []Fence
	// Adoptions give launch intents the instance found for them;
	// Orphans are tagged instances no live machine owns, to terminate.
	Adoptions []Adoption
	Orphans   []Orphan

	// Evictions send preempted replicas back to pending; Assignments place
	// replicas; Pending says why the others wait.
	Evictions   []Eviction
	Assignments []Assignment
	Pending     map[string]string
	// PendingChanged are the replicas of Pending whose reason the act
	// step writes, by id: those whose replica said otherwise, and those
	// the pass itself changed or made. The others say so already: a
	// fleet's launch has tens of thousands waiting, told the same every
	// pass.
	PendingChanged []string

	// Memory is the next memory.
	Memory Memory
	// Events explain decisions that no step above records by itself.
	Events []Event
	// Capacity is the planner's view: machines to add and remove, where
	// replicas go, and the cost (what `gantry plan` shows).
	Capacity planner.Plan
	// LiveMachines counts live machines (heartbeat sizing).
	LiveMachines int
	// ConsolidatedAt is when a pass last looked for machines to remove
	// or replace and found none: this one's time if it did, zero if it
	// removed one, else the snapshot's. The loop hands it to the next
	// pass (Snapshot.ConsolidatedAt).
	ConsolidatedAt time.Time
	// Wake is when a pass with the same inputs could next decide
	// something (Asleep).
	Wake Wake
}

// Acts reports whether the plan changes anything in the fleet (a
// replica, a machine, a provider call): what a decision's latency is
// measured to.
func (p Plan) Acts() bool {
	steps := len(p.CreateReplicas) + len(p.DeleteReplicas) + len(p.RetireReplicas) + len(p.EndMoves) + len(p.Reverts) +
		len(p.Launches) + len(p.LaunchCalls) + len(p.Starts) + len(p.Stops) + len(p.Drains) + len(p.Terminates) +
		len(p.TerminateCalls) + len(p.Unreachable) + len(p.Fences) + len(p.Adoptions) + len(p.Orphans) +
		len(p.Evictions) + len(p.Assignments)
	return steps > 0
}

// ReplicaDelete removes a replica its service no longer wants.
type ReplicaDelete struct {
	ID      string
	Service string
	Reason  string
}

// Launch is a new machine.
type Launch struct {
	// Key names it within the plan (the planner's key).
	Key          string
	Cluster      string
	Group        string
	InstanceType string
	Zone         string
	CapacityType string
	PricePerHour float64
	Reason       string
	// Replaces is the machine it is launched to replace (consolidation's
	// cheaper machine for its replicas): drained once this one joins.
	Replaces string
	// ProviderKey and Capacity are the cluster's provider instance and
	// the instance type's hardware.
	ProviderKey string
	Capacity    api.Resources
}

// MachineStep is an action on one machine, and why.
type MachineStep struct {
	Machine string
	Reason  string
}

// Drain starts draining a machine.
type Drain struct {
	Machine  string
	Reason   string
	Deadline time.Time
}

// Terminate ends a machine.
type Terminate struct {
	Machine string
	// Cause labels the terminations metric.
	Cause  string
	Reason string
	// Diagnose: fetch the machine's console to say why it never joined.
	Diagnose bool
}

// Adoption is the instance found for a launch intent.
type Adoption struct {
	Machine  string
	Instance provisioner.Instance
}

// Orphan is a tagged instance to terminate.
type Orphan struct {
	ProviderKey string
	Instance    provisioner.Instance
}

// Assignment places a replica. One that moves (From, the machine it
// leaves) keeps its old copy running there until the new one runs.
type Assignment struct {
	Replica   string
	Placement replica.Placement
	From      string
	// Why is said in the event (a spread repair).
	Why string
}

// Moving reports whether the replica moves off a machine.
func (a Assignment) Moving() bool { return a.From != "" }

// Eviction preempts a replica.
type Eviction struct {
	Replica string
	Machine string
	By      string
}

// Event is an event to record.
type Event struct {
	Type       string
	Reason     string
	ObjectKind string
	ObjectName string
	Message    string
}

// Causes of termination (the label of the terminations metric).
const (
	CauseUnreachable   = "unreachable"
	CauseJoinTimeout   = "join-timeout"
	CauseLaunchTimeout = "launch-timeout"
	CauseVanished      = "vanished"
	CauseRemoved       = "removed-from-spec"
	CauseShutdown      = "shutdown"
	CauseDrained       = "drained"
	CauseRollout       = "rollout"
	CauseStartFailed   = "start-failed"
	CauseFenced        = "fenced"
)
