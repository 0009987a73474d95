package decide

import (
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/internal/chunks"
	"github.com/gantry-dev/gantry/provisioner"
)

// Snapshot is everything a pass decides from, read at one instant: the
// store's objects, what the providers and the clusters' settings offer,
// and the observations of provider calls since the last pass.
type Snapshot struct {
	Clusters map[string]*api.Cluster
	Services []*api.Service
	// FailoverGroups are the declared failover groups.
	FailoverGroups []*api.FailoverGroup
	// Machines are the live machines; Replicas all replicas, or, when
	// ReplicaChunks is set, nil: the replicas are then in its chunks (as
	// a server's view keeps them, so that a change among 500,000 copies
	// a chunk, not the list).
	Machines      []*api.Machine
	Replicas      []*api.Replica
	ReplicaChunks chunks.List[api.Replica]
	// Heartbeats, when not nil, are heartbeats recorded apart from the
	// machines, aligned with Machines (which must then be by id:
	// MachinesByID): Heartbeats[i], in Unix nanoseconds, is Machines[i]'s
	// when later than its own LastHeartbeat (0: none). A server's view
	// hands them out so rather than a copy of every machine that beat.
	Heartbeats []int64
	// InStoreOrder: the caller vouches that Replicas are as the store
	// lists them, by service and id, each id its service's name, a dash
	// and more (replica.ID), as a server's view hands them out; the pass
	// then does not check it (a walk of every replica). Unset, it checks.
	InStoreOrder bool
	// MachinesByID: the caller vouches that Machines are by id (as Go
	// compares strings), as a server's view hands them out; the pass then
	// does not sort them (which costs a comparison of each when they are).
	MachinesByID bool
	// Retiring, when not nil, are the ids of every retiring replica,
	// sorted, as the caller (a server's view) keeps them: with the
	// replicas in the store's order, the pass takes them out of its list
	// by their places, not by reading every replica (a cache miss each of
	// 60,000 at 10,000 machines, every pass while any retires).
	Retiring []string
	// Moving, when not nil, are the ids of every replica moving off a
	// machine (PreviousMachine set), sorted, as the caller (a server's
	// view) keeps them: the pass looks for moves to end among them and
	// those it changed, not at every replica.
	Moving []string
	// Unplaced, when not nil, are the ids of every replica on no machine,
	// as the caller (a server's view) keeps them: the pass looks for
	// replicas to place among them and those it changed, not among all.
	Unplaced []string
	// Draining, when not nil, are the ids of the replicas on each draining
	// machine or moving off it (retiring ones too), by machine, for every
	// machine draining, as the caller (a server's view) keeps them: the
	// pass looks among them and those it changed for what the draining
	// machines still hold, not at every replica.
	Draining map[string][]string
	// Orphaned, when not nil, are the services some replica names that
	// are not among Services, as the caller (a server's view) counts
	// them: the pass deletes their replicas without looking at every
	// replica's service.
	Orphaned []string
	// Catalogs are what each cluster's provider settings offer, by cluster.
	Catalogs map[string]ClusterProvider
	// Providers describes each provider by name.
	Providers map[string]ProviderInfo
	// Instances are the latest Describe results, by machine.
	Instances map[string]InstanceObservation
	// Inventories are fresh Lists of each provider instance's tagged
	// instances, by provider key; each is used by one pass only.
	Inventories map[string]Inventory
	// ListedAt is when each provider key was last listed by this leader.
	ListedAt map[string]time.Time
	// InFlight are the provider calls running now, by CallKey.
	InFlight map[string]bool
	// Kubernetes is what each Kubernetes cluster's watch knows, by
	// cluster (absent until its watch has started).
	Kubernetes map[string]KubernetesObservation
	// SecretRevisions are the revisions of the Secrets, by name.
	SecretRevisions map[string]string
	// LivenessSince is when this server began to record heartbeats
	// reliably (it started leading, or its store came back): no machine
	// counts as silent for the time before.
	LivenessSince time.Time
	// HeardFrom, when not nil, is the heartbeats' keeper's word on them
	// as a whole: every machine's heartbeat is at or after Since but for
	// the machines in Except (by id). A pass then looks for silent
	// machines among those and the ones already unreachable alone, not
	// by reading every machine's heartbeat (nil: it reads them all).
	HeardFrom *HeardFrom `json:"-"`
	// ConsolidatedAt is when a pass last looked for machines to remove
	// or replace and found none (Plan.ConsolidatedAt; zero: not since
	// this leader began, or the last look removed one, so the next pass
	// looks). The next looks once Config.ConsolidateInterval has passed
	// since.
	ConsolidatedAt time.Time `json:"consolidatedAt,omitzero"`
	// Booked is the last pass's Plan.Booked (nil: none), a memo that
	// spares this pass booking again the machines nothing changed on.
	// The pass consumes it (its own Booking may reuse its memory): hand
	// a Booking to one pass only.
	Booked *Booking `json:"-"`
	// Changed is what changed since the snapshot Booked was made from
	// (nil: not known; Booked is then not used).
	Changed *Changes `json:"-"`
	// Scratch is memory the pass may work in (nil: its own), kept by a
	// caller that decides pass after pass.
	Scratch *Scratch `json:"-"`
}

// ClusterProvider is what a cluster's provider settings give: the
// provider instance's key and catalog, or why they cannot be used.
type ClusterProvider struct {
	Key     string
	Catalog []provisioner.InstanceType
	Err     string
}

// ProviderInfo is what decisions need to know of a provider.
type ProviderInfo struct {
	// Provisions is false for a provider that launches nothing (machines
	// joined by hand).
	Provisions bool
	// CanStop: its instances can be stopped and started (warm pool).
	CanStop bool
	// Runtimes its machines offer before their agents report.
	Runtimes []string
}

// InstanceObservation is what a provider said of a machine's instance.
type InstanceObservation struct {
	// Found is false when the provider no longer knows the instance.
	Found bool
	State provisioner.State
	At    time.Time
}

// Inventory is a provider instance's tagged instances, as listed.
type Inventory struct {
	Instances []provisioner.Instance
	// At is when the List call started: machines recorded after it may be
	// missing from it.
	At time.Time
}

// Provider call kinds, in CallKey.
const (
	CallLaunch    = "launch"
	CallTerminate = "terminate"
	CallDescribe  = "describe"
	CallList      = "list"
	CallStart     = "start"
	CallStop      = "stop"
	CallFence     = "fence"
)

// CallKey names one provider call in flight: the kind and the machine (or
// provider key, for a list; or instance, for an orphan).
func CallKey(kind, subject string) string { return kind + "/" + subject }

// AllReplicas are the snapshot's replicas in chunks, whichever way it
// holds them.
func (s *Snapshot) AllReplicas() chunks.List[api.Replica] {
	if s.ReplicaChunks != nil || len(s.Replicas) == 0 {
		return s.ReplicaChunks
	}
	return chunks.List[api.Replica]{s.Replicas}
}

// ReplicaCount is how many replicas the snapshot holds.
func (s *Snapshot) ReplicaCount() int {
	if s.ReplicaChunks != nil {
		return s.ReplicaChunks.Len()
	}
	return len(s.Replicas)
}

// heartbeat is the last heartbeat of Machines[i], whose version (or the
// pass's copy of it) m is: the later of its own and Heartbeats[i] (zero:
// none). An i beyond Machines (a machine the pass made) has m's own.
func (s *Snapshot) heartbeat(i int, m *api.Machine) time.Time {
	var at time.Time
	if m.LastHeartbeat != nil {
		at = *m.LastHeartbeat
	}
	if i < len(s.Heartbeats) && s.Heartbeats[i] != 0 {
		if recorded := time.Unix(0, s.Heartbeats[i]).UTC(); recorded.After(at) {
			return recorded
		}
	}
	return at
}

// HeardFrom is what a keeper of heartbeats vouches for (Snapshot.HeardFrom).
type HeardFrom struct {
	Since  time.Time
	Except map[string]bool
}
