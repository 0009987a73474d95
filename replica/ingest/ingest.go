// Package ingest records what the runners of replicas report: agents
// through their heartbeats now, Kubernetes pod watches next. Each source
// hands reports to a Sink; the store-backed one applies them through the
// replica state machine, with an event for every state change.
package ingest

import (
	"fmt"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/replica"
	"github.com/gantry-dev/gantry/store"
)

// Sink records a report in a transaction, given the replicas its holder
// holds.
type Sink interface {
	Record(tx store.Tx, held []*api.Replica, rep replica.Report, now time.Time) error
}

// Store is the Sink that writes to the store.
type Store struct{}

// Record implements Sink.
func (Store) Record(tx store.Tx, held []*api.Replica, rep replica.Report, now time.Time) error {
	applied, err := replica.Apply(held, rep, now)
	if err != nil {
		return err
	}
	for _, a := range applied {
		r, c := a.Replica, a.Change
		if c.HandedOver != "" {
			if err := store.Record(tx, now, api.EventNormal, "Moved", "Replica", r.ID, "running on %s; the copy on %s stops", rep.Holder, c.HandedOver); err != nil {
				return err
			}
		}
		if err := tx.PutReplica(r); err != nil {
			return err
		}
		if !c.StateChanged() {
			continue
		}
		typ := api.EventNormal
		if r.State == api.ReplicaCrashed || r.State == api.ReplicaFailed {
			typ = api.EventWarning
		}
		msg := fmt.Sprintf("%s on %s", r.State, rep.Holder)
		if r.Reason != "" {
			msg += ": " + r.Reason
		}
		if err := store.Record(tx, now, typ, "ReplicaState", "Replica", r.ID, "%s", msg); err != nil {
			return err
		}
	}
	return nil
}
