// Package store is Gantry's state: declared resources, machines, replicas,
// events and credentials. Every change happens in a transaction; a write is
// acknowledged only once it is durable.
package store

import (
	"context"
	"errors"

	"github.com/gantry-dev/gantry/api"
)

// ErrNotFound is returned (wrapped) for a missing object.
var ErrNotFound = errors.New("not found")

// Store runs transactions. Implementations: sqlite (embedded, default).
type Store interface {
	// Update runs fn in a read-write transaction, committed when fn returns
	// nil and rolled back otherwise.
	Update(ctx context.Context, fn func(Tx) error) error
	// View runs fn in a read-only transaction.
	View(ctx context.Context, fn func(Tx) error) error
	Close() error
}

// Tx is what a transaction can read and write.
type Tx interface {
	GetCluster(name string) (*api.Cluster, error)
	ListClusters() ([]*api.Cluster, error)
	PutCluster(c *api.Cluster) error
	DeleteCluster(name string) error

	GetService(name string) (*api.Service, error)
	ListServices() ([]*api.Service, error)
	PutService(s *api.Service) error
	DeleteService(name string) error

	GetMachine(id string) (*api.Machine, error)
	ListMachines(f MachineFilter) ([]*api.Machine, error)
	PutMachine(m *api.Machine) error

	GetReplica(id string) (*api.Replica, error)
	ListReplicas(f ReplicaFilter) ([]*api.Replica, error)
	PutReplica(r *api.Replica) error
	DeleteReplica(id string) error

	AddEvent(e *api.Event) error
	ListEvents(f EventFilter) ([]*api.Event, error)

	// Credentials are stored as hashes only.
	GetCredentialHash(machineID string) ([]byte, error)
	PutCredentialHash(machineID string, hash []byte) error

	// Meta holds server-wide values such as the join-token signing key.
	GetMeta(key string) (string, error)
	PutMeta(key, value string) error
}

// MachineFilter selects machines; zero fields match all.
type MachineFilter struct {
	Cluster string
	// LiveOnly leaves out terminated machines.
	LiveOnly bool
}

// ReplicaFilter selects replicas; zero fields match all.
type ReplicaFilter struct {
	Cluster string
	Service string
	Machine string
	// PreviousMachine selects replicas moving off that machine.
	PreviousMachine string
}

// EventFilter selects events, newest last.
type EventFilter struct {
	ObjectKind string
	ObjectName string
	AfterID    int64
	Limit      int
}
