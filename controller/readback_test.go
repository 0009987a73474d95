package controller

import (
	"context"
	"errors"
	"testing"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/store"
	"github.com/gantry-dev/gantry/store/sqlite/sqlitetest"
)

// countingTx counts the replica and machine reads that reach the store.
type countingTx struct {
	store.Tx
	reads int
}

func (c *countingTx) GetReplica(id string) (*api.Replica, error) {
	c.reads++
	return c.Tx.GetReplica(id)
}

func (c *countingTx) GetMachine(id string) (*api.Machine, error) {
	c.reads++
	return c.Tx.GetMachine(id)
}

// The act step reads back what it wrote without going to the store, and
// every read is a copy of the object as written: changing it changes
// nothing kept.
func TestActReadsBackWhatItWroteFromMemory(t *testing.T) {
	db := sqlitetest.Open(t)
	err := db.Update(context.Background(), func(tx store.Tx) error {
		counted := &countingTx{Tx: tx}
		rb := newReadBack(counted)
		if err := rb.CreateMachine(&api.Machine{ID: "m1", Cluster: "dev", FleetState: api.FleetReady}); err != nil {
			return err
		}
		if err := rb.PutReplica(&api.Replica{ID: "web-0", Service: "web", Cluster: "dev", HostPorts: map[string]int{"http": 1}}); err != nil {
			return err
		}
		r, err := rb.GetReplica("web-0")
		if err != nil {
			return err
		}
		r.Machine, r.HostPorts["http"] = "m1", 2
		again, err := rb.GetReplica("web-0")
		if err != nil {
			return err
		}
		if again.Machine != "" || again.HostPorts["http"] != 1 {
			t.Errorf("a change to a read replica reached what is kept: machine %q, port %d", again.Machine, again.HostPorts["http"])
		}
		if err := rb.PutReplica(r); err != nil {
			return err
		}
		if got, err := rb.GetReplica("web-0"); err != nil || got.Machine != "m1" {
			t.Errorf("read back after a write: %+v, %v", got, err)
		}
		m, err := rb.GetMachine("m1")
		if err != nil || m.ID != "m1" {
			t.Errorf("read back the machine: %+v, %v", m, err)
		}
		if counted.reads != 0 {
			t.Errorf("%d reads of written objects reached the store", counted.reads)
		}
		if err := rb.DeleteReplica("web-0"); err != nil {
			return err
		}
		if _, err := rb.GetReplica("web-0"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("a deleted replica read back: %v", err)
		}
		stored, err := tx.GetMachine("m1")
		if err != nil || stored.ID != "m1" {
			t.Errorf("the store does not hold the machine written through: %+v, %v", stored, err)
		}
		for range 2 {
			if _, err := rb.GetReplica("web-1"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("a replica never written: %v", err)
			}
		}
		if counted.reads != 2 {
			t.Errorf("%d reads of a missing replica reached the store, want 2 (a miss is not kept)", counted.reads)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
