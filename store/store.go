// Package store is Gantry's state: declared resources, machines, replicas,
// events and credentials. Every change happens in a transaction; a write is
// acknowledged only once it is durable.
package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gantry-dev/gantry/api"
)

// Errors callers act on by kind.
var (
	// ErrNotFound is returned (wrapped) for a missing object.
	ErrNotFound = errors.New("not found")
	// ErrExists is returned (wrapped) when creating an object whose key is
	// taken.
	ErrExists = errors.New("already exists")
	// ErrUnavailable marks a failure of the store itself (disk full,
	// read-only file system, database gone), as opposed to a missing
	// object, a conflict or the caller's own error.
	ErrUnavailable = errors.New("store unavailable")
)

// Errors of a lease (stores that several servers share).
var (
	// ErrLeaseHeld: another holder has the lease and it has not expired.
	ErrLeaseHeld = errors.New("lease held by another server")
	// ErrFenced: a write checked a lease its writer no longer holds (it
	// expired, or another holder took it since): the write is refused.
	ErrFenced = errors.New("fenced: this server no longer holds the lease")
)

// AllLiveness asks ScanLiveness for every recorded heartbeat (rows
// written before heartbeats were marked carry mark 0).
const AllLiveness int64 = -1

// Unavailable wraps a failure of the store itself.
func Unavailable(op string, err error) error {
	return fmt.Errorf("%s: %w: %w", op, ErrUnavailable, err)
}

// Store runs transactions. Implementations: sqlite (embedded, default).
type Store interface {
	// Update runs fn in a read-write transaction, committed when fn returns
	// nil and rolled back otherwise. fn may run more than once (the store
	// retries a transaction that lost a race): it must touch nothing
	// outside its transaction, and set every variable it shares with the
	// caller afresh on each run.
	Update(ctx context.Context, fn func(Tx) error) error
	// View runs fn in a read-only transaction. Reads never wait behind a
	// writer.
	View(ctx context.Context, fn func(Tx) error) error
	// Changed wakes the followers of the change feed (see feed.go).
	Notifier
	Close() error
}

// Lease is one term of a named lease: Epoch grows with every term, so a
// holder's writes can be fenced to the term it was granted.
type Lease struct {
	Name   string
	Holder string
	Epoch  int64
}

// Leases is implemented by stores that several servers share: one of
// them holds the lease and leads. Time is the database's, so the servers'
// clocks need not agree.
type Leases interface {
	// AcquireLease takes the lease, or renews it for its holder, for ttl.
	// A renewal keeps the epoch; a new term (another holder, or the same
	// one after it expired) increments it. ErrLeaseHeld when another
	// holder has it.
	AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (Lease, error)
	// ReleaseLease gives the lease up at once (a clean shutdown), if l is
	// still its current term.
	ReleaseLease(ctx context.Context, l Lease) error
}

// LeaseTx is implemented by the transactions of stores with Leases.
type LeaseTx interface {
	// CheckLease fails with ErrFenced unless l is the current, unexpired
	// term; a new term cannot begin until this transaction ends.
	CheckLease(l Lease) error
}

// Tx is what a transaction can read and write. Writes of clusters,
// services, failover groups, machines and replicas go to the change feed
// (feed.go): each gets the next revision, which the stored object
// carries as its resourceVersion (the caller's object is left as it is).
type Tx interface {
	FeedTx

	GetCluster(name string) (*api.Cluster, error)
	ListClusters() ([]*api.Cluster, error)
	PutCluster(c *api.Cluster) error
	DeleteCluster(name string) error

	GetService(name string) (*api.Service, error)
	ListServices() ([]*api.Service, error)
	PutService(s *api.Service) error
	DeleteService(name string) error

	GetFailoverGroup(name string) (*api.FailoverGroup, error)
	ListFailoverGroups() ([]*api.FailoverGroup, error)
	PutFailoverGroup(g *api.FailoverGroup) error
	DeleteFailoverGroup(name string) error

	GetMachine(id string) (*api.Machine, error)
	ListMachines(f MachineFilter) ([]*api.Machine, error)
	// CountMachines is how many machines ListMachines of the filter would
	// list, its page aside.
	CountMachines(f MachineFilter) (int, error)
	// CreateMachine inserts a new machine; ErrExists if its id is taken.
	CreateMachine(m *api.Machine) error
	// PutMachine updates (or inserts) a machine.
	PutMachine(m *api.Machine) error
	// PutLiveness records machines' last heartbeats (a batch, flushed by
	// the server that received them) without rewriting the machines;
	// GetMachine and ListMachines report the later of this and the
	// machine's own LastHeartbeat. An older time never replaces a newer.
	PutLiveness(beats map[string]time.Time) error
	// ListLiveness is the heartbeats PutLiveness recorded, by machine
	// (what a copy of the machines kept from the feed, which carries no
	// heartbeats, lays over them).
	ListLiveness() (map[string]time.Time, error)
	// ScanLiveness calls each, in no order, with the heartbeats recorded
	// after the mark after (AllLiveness: every one) and the mark of the
	// write that recorded each. Each write's mark is greater than every
	// mark written before it, in commit order: a reader that saw mark N
	// has seen every heartbeat recorded up to N, and ScanLiveness(N)
	// gives it the ones recorded since.
	ScanLiveness(after int64, each func(machine string, at time.Time, mark int64)) error

	// MachineWork reads a machine with the replicas on it and those
	// leaving it (as ListReplicas with Machine and with PreviousMachine),
	// in one statement: the heartbeat's read.
	MachineWork(id string) (m *api.Machine, on, leaving []*api.Replica, err error)

	GetReplica(id string) (*api.Replica, error)
	ListReplicas(f ReplicaFilter) ([]*api.Replica, error)
	// CountReplicas is how many replicas ListReplicas of the filter would
	// list, its page aside.
	CountReplicas(f ReplicaFilter) (int, error)
	PutReplica(r *api.Replica) error
	DeleteReplica(id string) error

	AddEvent(e *api.Event) error
	ListEvents(f EventFilter) ([]*api.Event, error)

	// Credentials are stored as hashes only.
	GetCredentialHash(machineID string) ([]byte, error)
	PutCredentialHash(machineID string, hash []byte) error

	// API tokens, each with the hash of its secret.
	GetToken(id string) (*api.Token, []byte, error)
	ListTokens() ([]*api.Token, error)
	PutToken(t *api.Token, hash []byte) error

	// Secrets: their keys and revision in clear, their values sealed by
	// the server (the store never sees them in clear).
	GetSecret(name string) (*api.Secret, string, error)
	ListSecrets() ([]*api.Secret, error)
	PutSecret(s *api.Secret, sealed string) error
	DeleteSecret(name string) error

	// Meta holds server-wide values such as the join-token signing key.
	GetMeta(key string) (string, error)
	PutMeta(key, value string) error
	// ListMetaPrefix reads the values whose key starts with prefix (the
	// traces kept for simulations are under "trace/").
	ListMetaPrefix(prefix string) (map[string]string, error)
	// DeleteMeta removes a value (none: no change).
	DeleteMeta(key string) error

	// Memory is what the control loop remembers between passes (desired
	// sizes, backoffs, conditions, progress), one entry per key, so that
	// another server resumes where the last one stopped.
	ListMemory() (map[string]string, error)
	// ListMemoryPrefix reads the entries whose key starts with prefix.
	ListMemoryPrefix(prefix string) (map[string]string, error)
	// GetMemory reads one entry; ErrNotFound when there is none.
	GetMemory(key string) (string, error)
	PutMemory(key, value string) error
	DeleteMemory(key string) error
}

// MachineFilter selects machines; zero fields match all.
type MachineFilter struct {
	Cluster string
	// LiveOnly leaves out terminated machines.
	LiveOnly bool
	// Page reads one page of the list (key: the machine id).
	Page
}

// ReplicaFilter selects replicas; zero fields match all.
type ReplicaFilter struct {
	Cluster string
	Service string
	Machine string
	// PreviousMachine selects replicas moving off that machine.
	PreviousMachine string
	// Page reads one page of the list.
	Page
}

// Page is one page of a list in its order: at most Limit objects (0: all)
// after the object of key After (the service and id of a replica, the
// id of a machine).
type Page struct {
	Limit int
	After []string
	// Offset skips that many objects first, with a Limit: a numbered
	// page, as a dashboard shows (reading after a key is cheaper).
	Offset int
}

// EventFilter selects events, newest last.
type EventFilter struct {
	ObjectKind string
	ObjectName string
	AfterID    int64
	Limit      int
}
