package controller

import (
	"encoding/json"
	"fmt"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/store"
)

// readBack is the act step's transaction: it keeps the replicas and
// machines the step has read or written, so that reading one again does
// not go to the store. A pass that makes 10,000 replicas writes each one
// and reads it back to place it; on PostgreSQL, whose store holds writes
// back to send them together, every such read sent the writes held so far
// and cost a round trip of its own.
//
// Objects are kept as their JSON, as the store keeps them: a read returns
// a copy the caller may change.
type readBack struct {
	store.Tx
	replicas map[string][]byte // nil: deleted
	machines map[string][]byte
}

func newReadBack(tx store.Tx) *readBack {
	return &readBack{Tx: tx, replicas: map[string][]byte{}, machines: map[string][]byte{}}
}

func keep[T any](cache map[string][]byte, id string, v *T) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("keep %q: %w", id, err)
	}
	cache[id] = data
	return nil
}

// recall returns the kept object (found), or ErrNotFound if it was
// deleted.
func recall[T any](cache map[string][]byte, kind, id string) (v *T, found bool, err error) {
	data, ok := cache[id]
	if !ok {
		return nil, false, nil
	}
	if data == nil {
		return nil, true, fmt.Errorf("%s %q: %w", kind, id, store.ErrNotFound)
	}
	v = new(T)
	if err := json.Unmarshal(data, v); err != nil {
		return nil, true, fmt.Errorf("%s %q: %w", kind, id, err)
	}
	return v, true, nil
}

// readThrough returns the kept object, or reads it from the store and
// keeps it (a miss is not kept).
func readThrough[T any](cache map[string][]byte, kind, id string, read func(string) (*T, error)) (*T, error) {
	if v, found, err := recall[T](cache, kind, id); found {
		return v, err
	}
	v, err := read(id)
	if err != nil {
		return nil, err
	}
	return v, keep(cache, id, v)
}

func (t *readBack) GetReplica(id string) (*api.Replica, error) {
	return readThrough(t.replicas, "replica", id, t.Tx.GetReplica)
}

func (t *readBack) PutReplica(r *api.Replica) error {
	if err := t.Tx.PutReplica(r); err != nil {
		return err
	}
	return keep(t.replicas, r.ID, r)
}

func (t *readBack) DeleteReplica(id string) error {
	if err := t.Tx.DeleteReplica(id); err != nil {
		return err
	}
	t.replicas[id] = nil
	return nil
}

func (t *readBack) GetMachine(id string) (*api.Machine, error) {
	return readThrough(t.machines, "machine", id, t.Tx.GetMachine)
}

func (t *readBack) PutMachine(m *api.Machine) error {
	if err := t.Tx.PutMachine(m); err != nil {
		return err
	}
	return keep(t.machines, m.ID, m)
}

func (t *readBack) CreateMachine(m *api.Machine) error {
	if err := t.Tx.CreateMachine(m); err != nil {
		return err
	}
	return keep(t.machines, m.ID, m)
}
