package api

import "time"

// KindFailoverGroup is a higher-order topology: one service run as a
// primary in one cluster and a replica in another, failed over and back.
const KindFailoverGroup = "FailoverGroup"

// FailoverGroup is a service deployed twice, as primary and replica.
type FailoverGroup struct {
	APIVersion string             `json:"apiVersion,omitempty"`
	Kind       string             `json:"kind"`
	Metadata   ObjectMeta         `json:"metadata"`
	Spec       FailoverGroupSpec  `json:"spec"`
	Status     *FailoverGroupInfo `json:"status,omitempty"`
}

// FailoverGroupSpec is what the operator declares about a failover group.
type FailoverGroupSpec struct {
	// Template is the service each side runs (its cluster and replica
	// count are the group's).
	Template ServiceSpec `json:"template"`
	// Primary is the side that starts as primary (and that revert
	// returns to); Replica the side that starts as its replica.
	Primary FailoverSide `json:"primary"`
	// Replica is the side that follows the primary and takes over when it
	// fails.
	Replica FailoverSide `json:"replica"`
	// Capability is how the software is deployed, replicated, promoted and
	// fenced: postgres, or generic hooks.
	Capability FailoverCapability `json:"capability"`
	// Health is how the primary is watched: consecutive failures before a
	// failover, successes before healthy.
	Health FailoverHealth `json:"health,omitempty"`
	// LeaseSeconds is how long a primary may serve without renewing its
	// lease; FenceMarginSeconds is how much longer the server waits when
	// the primary's machine cannot be stopped through its provider.
	LeaseSeconds int `json:"leaseSeconds,omitempty"`
	// FenceMarginSeconds is how long after the old primary's lease runs out
	// the replica is promoted when its machine cannot be confirmed stopped.
	FenceMarginSeconds int `json:"fenceMarginSeconds,omitempty"`
	// Mode is automatic (fail over on its own) or manual (only
	// `gantry failover promote`).
	Mode string `json:"mode,omitempty"`
}

// Failover modes.
const (
	FailoverAutomatic = "automatic"
	FailoverManual    = "manual"
)

// FailoverSide is where one side of a group runs.
type FailoverSide struct {
	// Cluster is where this side runs.
	Cluster string `json:"cluster"`
}

// FailoverCapability is the software's failover capability.
type FailoverCapability struct {
	// Name is postgres or generic.
	Name string `json:"name"`
	// Postgres holds the PostgreSQL capability's settings.
	Postgres *PostgresCapability `json:"postgres,omitempty"`
	// Generic holds the hook commands of the generic capability.
	Generic *GenericCapability `json:"generic,omitempty"`
}

// Capability names.
const (
	CapabilityPostgres = "postgres"
	CapabilityGeneric  = "generic"
)

// PostgresCapability runs PostgreSQL streaming replication.
type PostgresCapability struct {
	// Synchronous makes every commit wait for the replica while it
	// streams. When it stops, commits wait until the server has recorded
	// that the primary has no synchronous standby; then the primary
	// acknowledges alone, and an automatic failover will not promote the
	// replica until it is synchronous again (no acknowledged write is
	// lost by an automatic failover; `gantry failover promote
	// --accept-data-loss` may lose some).
	Synchronous bool `json:"synchronous,omitempty"`
	// MaximumLagBytes, without Synchronous, is how far (bytes of WAL) the
	// replica may have been behind the primary's last report for an
	// automatic failover to promote it (default 1 MiB; what it lacks is
	// lost).
	MaximumLagBytes int64 `json:"maximumLagBytes,omitempty"`
	// BinDir holds initdb, pg_basebackup, pg_rewind and postgres.
	BinDir string `json:"binDir,omitempty"`
	// User is the operating-system user PostgreSQL runs as when the agent
	// runs as root.
	User string `json:"user,omitempty"`
	// DataRoot holds PostgreSQL's files, one directory per machine and
	// group, when the agent runs as root (PostgreSQL's user must reach
	// them); default /var/lib/gantry/failover. A non-root agent keeps them
	// in its own data directory.
	DataRoot string `json:"dataRoot,omitempty"`
	// PasswordEnv names the environment variable (of the template, from a
	// Secret) holding the password of the postgres user; without it,
	// connections are trusted from loopback only.
	PasswordEnv string `json:"passwordEnv,omitempty"`
}

// GenericCapability fails over any software through hook commands, run
// with the GANTRY_FAILOVER_* environment.
type GenericCapability struct {
	// Promote runs when this side becomes primary.
	Promote []string `json:"promote"`
	// Demote runs when a former primary becomes a replica.
	Demote []string `json:"demote,omitempty"`
	// Replicate runs when this side follows the primary.
	Replicate []string `json:"replicate,omitempty"`
	// Health exits 0 while the software serves in its role (default: its
	// command runs).
	Health []string `json:"health,omitempty"`
}

// FailoverHealth is when a primary counts as failed and a side as
// healthy again.
type FailoverHealth struct {
	// FailureThreshold is how many failed checks in a row start a failover.
	FailureThreshold int `json:"failureThreshold,omitempty"`
	// SuccessThreshold is how many passing checks in a row count as healthy
	// again.
	SuccessThreshold int `json:"successThreshold,omitempty"`
	// IntervalSeconds is the time between checks.
	IntervalSeconds int `json:"intervalSeconds,omitempty"`
}

// FailoverGroupInfo is a group's observed state.
type FailoverGroupInfo struct {
	Phase   string `json:"phase"`
	Epoch   int64  `json:"epoch"`
	Message string `json:"message,omitempty"`
	// Primary is the cluster of the side that is primary now, and
	// Endpoint where clients reach it (host:port), "" while none serves.
	Primary      string           `json:"primary,omitempty"`
	Endpoint     string           `json:"endpoint,omitempty"`
	Members      []FailoverMember `json:"members"`
	LastFailover *time.Time       `json:"lastFailover,omitempty"`
	// SyncStandby is the cluster whose member every commit of the
	// primary waits for, as of the primary's last report ("" none: an
	// automatic failover of a synchronous group would lose writes, and
	// does not happen).
	SyncStandby string `json:"syncStandby,omitempty"`
}

// FailoverMember is one side as observed.
type FailoverMember struct {
	// Replication is what the member's software last reported of its
	// replication (WAL positions, streaming, the standby a primary waits
	// for).
	Replication *ReplicationStatus `json:"replication,omitempty"`
	Cluster     string             `json:"cluster"`
	Service     string             `json:"service"`
	Home        string             `json:"home"`
	Role        string             `json:"role"`
	Replica     string             `json:"replica,omitempty"`
	Machine     string             `json:"machine,omitempty"`
	Endpoint    string             `json:"endpoint,omitempty"`
	State       string             `json:"state,omitempty"`
	Health      Health             `json:"health,omitempty"`
	// Serving is what the member itself last reported: it acts in its
	// role at Epoch.
	Serving bool  `json:"serving"`
	Epoch   int64 `json:"epoch"`
	// Message is the member's own word on why it does not serve, or is
	// not in its role yet (its last error).
	Message string `json:"message,omitempty"`
}

// Failover roles, as told to members.
const (
	RolePrimary = "primary"
	RoleReplica = "replica"
	// RoleFenced must not serve: it stops and waits.
	RoleFenced = "fenced"
)

// FailoverAssignment tells a member its role (delivered with its
// assignment; not part of its spec, so a role change restarts nothing).
type FailoverAssignment struct {
	Group string `json:"group"`
	Role  string `json:"role"`
	Epoch int64  `json:"epoch"`
	// Primary is the primary's endpoint (host:port), for a replica.
	Primary string `json:"primary,omitempty"`
	// Bootstrap allows a primary with no data to initialise it (only
	// before the group ever had a primary).
	Bootstrap    bool               `json:"bootstrap,omitempty"`
	LeaseSeconds int                `json:"leaseSeconds"`
	Capability   FailoverCapability `json:"capability"`
	// LeaseExpiresAt, for a primary, is when the member must stop
	// serving by itself unless its agent renewed the lease meanwhile
	// (written by the agent at each renewal, read by the member with the
	// machine's clock): a primary fences itself even when its agent is
	// stopped or gone.
	LeaseExpiresAt *time.Time `json:"leaseExpiresAt,omitempty"`
	// SyncStandby, for a primary, is the standby (by name) the server
	// recorded as synchronous: a synchronous primary stops waiting for a
	// standby that stopped streaming only once this is "".
	SyncStandby string `json:"syncStandby,omitempty"`
}

// MemberStatus is what a member reports of itself (through its agent).
type MemberStatus struct {
	Role    string `json:"role"`
	Epoch   int64  `json:"epoch"`
	Serving bool   `json:"serving"`
	Message string `json:"message,omitempty"`
	// Replication is what the software reports of its replication (the
	// postgres capability), when it serves.
	Replication *ReplicationStatus `json:"replication,omitempty"`
}

// ReplicationStatus is a member's replication as its software reports it.
// Positions are bytes of WAL (a PostgreSQL LSN as a number).
type ReplicationStatus struct {
	// Name is how the primary knows this standby (application_name).
	Name     string `json:"name,omitempty"`
	Timeline int64  `json:"timeline,omitempty"`
	// FlushPosition: a primary's WAL written to disk.
	FlushPosition uint64 `json:"flushPosition,omitempty"`
	// ReceivedPosition and ReplayedPosition: a standby's WAL received from
	// the primary (and flushed), and applied.
	ReceivedPosition uint64 `json:"receivedPosition,omitempty"`
	ReplayedPosition uint64 `json:"replayedPosition,omitempty"`
	// Streaming: a standby's WAL receiver streams from the primary.
	Streaming bool `json:"streaming,omitempty"`
	// SyncStandby: on a primary, the standby (by Name) every commit waits
	// for; "" when it acknowledges commits alone.
	SyncStandby string `json:"syncStandby,omitempty"`
}

// DefaultMaximumLagBytes is an asynchronous group's limit for automatic
// failover.
const DefaultMaximumLagBytes = 1 << 20

// FailoverMemberSpec marks a service as one side of a group (set by the
// server when it expands the group).
type FailoverMemberSpec struct {
	Group string `json:"group"`
	// Home is "primary" or "replica": the side's role in the spec.
	Home string `json:"home"`
}

// FailoverRequest asks a group for a manual step.
type FailoverRequest struct {
	// Action is promote (the replica side becomes primary) or revert
	// (back to the spec's primary side).
	Action string `json:"action"`
}

// Manual failover actions. FailoverPromoteAcceptDataLoss promotes a
// replica that was not synchronous (or lagged) as of the failed primary's
// last report: the writes it lacks are lost.
const (
	FailoverPromote               = "promote"
	FailoverPromoteAcceptDataLoss = "promote-accept-data-loss"
	FailoverRevert                = "revert"
)
