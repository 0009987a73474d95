package api

import "time"

// Machine is a provisioned machine as Gantry observes it.
type Machine struct {
	ID string `json:"id"`
	// ResourceVersion is the store revision of the machine's last change.
	ResourceVersion int64  `json:"resourceVersion,omitempty,string"`
	Cluster         string `json:"cluster"`
	Group           string `json:"group"`
	InstanceType    string `json:"instanceType"`
	Zone            string `json:"zone,omitempty"`
	CapacityType    string `json:"capacityType,omitempty"`
	Provider        string `json:"provider"`
	// ProviderKey names the provider instance (provider, region, account)
	// the machine was launched through.
	ProviderKey string `json:"providerKey,omitempty"`
	ProviderID  string `json:"providerId,omitempty"`
	// InstanceKnownAt is when Gantry learned ProviderID (the launch's
	// answer, or a list that found the instance by its tags): a list
	// begun before then cannot say the instance is gone.
	InstanceKnownAt *time.Time `json:"instanceKnownAt,omitempty"`
	// ReportedInstance is the instance id the agent saw on its machine
	// (cloud metadata, its launch arguments), reported at join; only the
	// provider's answer or its tags make it the ProviderID.
	ReportedInstance string `json:"reportedInstance,omitempty"`
	// DNSAddress is where the machine's agent answers its cluster's names.
	DNSAddress string `json:"dnsAddress,omitempty"`
	// MeshKey and MeshEndpoint are the machine's side of its cluster's
	// overlay: its WireGuard public key and where it listens.
	MeshKey      string `json:"meshKey,omitempty"`
	MeshEndpoint string `json:"meshEndpoint,omitempty"`
	// Conditions are what the machine's agent reports of its own parts
	// (IngressReady on an edge machine).
	Conditions []Condition `json:"conditions,omitempty"`
	// TemplateHash is the group template the machine was launched with.
	TemplateHash string `json:"templateHash,omitempty"`
	LaunchKey    string `json:"launchKey"`
	// Replaces is the machine consolidation launched this one to replace
	// (a cheaper machine for its replicas): once this one has joined, the
	// control loop drains that one.
	Replaces     string            `json:"replaces,omitempty"`
	Addresses    []string          `json:"addresses,omitempty"`
	Subnet       string            `json:"subnet,omitempty"`
	JoinState    JoinState         `json:"joinState"`
	FleetState   FleetState        `json:"fleetState"`
	Reason       string            `json:"reason,omitempty"`
	Labels       map[string]string `json:"labels,omitempty"`
	Runtimes     []string          `json:"runtimes,omitempty"`
	GPUs         []GPUDevice       `json:"gpus,omitempty"`
	Capacity     Resources         `json:"capacity"`
	Allocatable  Resources         `json:"allocatable"`
	Allocated    Resources         `json:"allocated"`
	PricePerHour float64           `json:"pricePerHour,omitempty"`
	// TemplateVersion is the agent.version its agent reports it was
	// launched with.
	TemplateVersion string     `json:"templateVersion,omitempty"`
	CreatedAt       time.Time  `json:"createdAt"`
	JoinedAt        *time.Time `json:"joinedAt,omitempty"`
	LastHeartbeat   *time.Time `json:"lastHeartbeat,omitempty"`
	// DrainDeadline is when a draining machine is terminated even if some
	// replicas could not move.
	DrainDeadline *time.Time `json:"drainDeadline,omitempty"`
	// Cordoned machines take no new replicas (`gantry cordon`); those
	// they run stay.
	Cordoned bool `json:"cordoned,omitempty"`
	// UnreachableSince is set while the machine misses its heartbeats; its
	// replicas move once the reschedule grace has passed.
	UnreachableSince *time.Time `json:"unreachableSince,omitempty"`
	StateChangedAt   time.Time  `json:"stateChangedAt"`
	// ReportSequence is the Sequence of the last heartbeat whose report
	// was applied: an older one is stale.
	ReportSequence int64 `json:"reportSequence,omitempty"`
}

// ManualLaunchKey is the launch key of every machine joined by hand
// (`gantry join-token`): no launch made it, so it is shared.
const ManualLaunchKey = "manual"

// JoinState is how far a machine got towards running the agent. Package
// fleet owns its transitions.
type JoinState string

// Join states.
const (
	JoinProvisioning JoinState = "provisioning"
	JoinBooting      JoinState = "booting"
	JoinJoining      JoinState = "joining"
	JoinJoined       JoinState = "joined"
	JoinFailed       JoinState = "failed"
)

// FleetState is what Gantry does with a machine. Package fleet owns its
// transitions.
type FleetState string

// Fleet states.
const (
	FleetReady    FleetState = "ready"
	FleetActive   FleetState = "active"
	FleetDraining FleetState = "draining"
	// FleetStopped is a warm-pool machine whose instance is stopped.
	FleetStopped     FleetState = "stopped"
	FleetTerminating FleetState = "terminating"
	FleetTerminated  FleetState = "terminated"
)

// Live reports whether the machine counts against its group's size.
func (m *Machine) Live() bool {
	return m.FleetState != FleetTerminated
}

// Schedulable reports whether new replicas may be placed on the machine.
func (m *Machine) Schedulable() bool {
	return m.JoinState == JoinJoined && (m.FleetState == FleetReady || m.FleetState == FleetActive) && m.UnreachableSince == nil && !m.Cordoned
}

// CountsTowardGroup reports whether the machine counts toward its group's
// size: live, not on its way out, and not lost (an unreachable machine is
// replaced at once).
func (m *Machine) CountsTowardGroup() bool {
	return m.Live() && m.FleetState != FleetTerminating && m.UnreachableSince == nil
}

// WithHeartbeat is m when its own heartbeat is at or after at, else a
// copy of m carrying at: machines read from a store or a view are
// shared between readers, never changed in place.
func (m *Machine) WithHeartbeat(at time.Time) *Machine {
	if m.LastHeartbeat != nil && !at.After(*m.LastHeartbeat) {
		return m
	}
	c := *m
	c.LastHeartbeat = &at
	return &c
}

// Launching reports whether the machine was launched and has not joined
// yet.
func (m *Machine) Launching() bool {
	return m.Live() && m.FleetState != FleetTerminating && m.JoinState != JoinJoined && m.JoinState != JoinFailed
}

// Running reports whether a replica state means its process runs.
func (s ReplicaState) Running() bool { return s == ReplicaRunning }

// GPUDevice is one GPU an agent reported.
type GPUDevice struct {
	Index  int     `json:"index"`
	Type   string  `json:"type"`
	VRAMGB float64 `json:"vramGB"`
	UUID   string  `json:"uuid,omitempty"`
}
