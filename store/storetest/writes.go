package storetest

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/store"
)

// testWritesReadBackInTheirTransaction: a transaction reads back what it
// wrote, whatever the store holds back to send together (PostgreSQL's
// write-behind), and its changes and events are logged as written: one
// change per write, in order, the first of a new object a creation; its
// events in the order added.
func testWritesReadBackInTheirTransaction(t *testing.T, s store.Store) {
	ctx := context.Background()
	start := revision(t, s)
	m := &api.Machine{ID: "m1", Cluster: "dev", FleetState: api.FleetReady}
	r1 := &api.Replica{ID: "web-1", Service: "web", Cluster: "dev"}
	r2 := &api.Replica{ID: "web-2", Service: "web", Cluster: "dev", Machine: "m1"}
	event := func(tx store.Tx, msg string) error {
		return tx.AddEvent(&api.Event{Type: api.EventNormal, Reason: "R", ObjectKind: "Replica", ObjectName: "web-1", Message: msg})
	}
	must(t, s.Update(ctx, func(tx store.Tx) error {
		steps := []func() error{
			func() error { return tx.CreateMachine(m) },
			func() error { return tx.PutReplica(r1) },
			func() error { return event(tx, "first") },
			func() error { return tx.PutReplica(r2) },
			func() error {
				placed := *r1
				placed.Machine = "m1"
				return tx.PutReplica(&placed)
			},
			func() error {
				got, err := tx.GetReplica("web-1")
				if err == nil && got.Machine != "m1" {
					return fmt.Errorf("web-1 read back on machine %q, want m1", got.Machine)
				}
				return err
			},
			func() error {
				n, err := tx.CountReplicas(store.ReplicaFilter{Machine: "m1"})
				if err == nil && n != 2 {
					return fmt.Errorf("%d replicas counted on m1, want 2", n)
				}
				return err
			},
			func() error {
				_, on, _, err := tx.MachineWork("m1")
				if err == nil && !slices.Equal(replicaIDs(on), []string{"web-1", "web-2"}) {
					return fmt.Errorf("machine m1's work %q, want web-1 and web-2", replicaIDs(on))
				}
				return err
			},
			func() error { return event(tx, "second") },
			func() error {
				events, err := tx.ListEvents(store.EventFilter{ObjectKind: "Replica", ObjectName: "web-1"})
				if err == nil && len(events) != 2 {
					return fmt.Errorf("%d events read back, want 2", len(events))
				}
				return err
			},
			func() error { return tx.DeleteReplica("web-2") },
			func() error { return event(tx, "third") },
		}
		for i, step := range steps {
			if err := step(); err != nil {
				return fmt.Errorf("step %d: %w", i, err)
			}
		}
		return nil
	}))

	var got []string
	changes := readChanges(t, s, store.ChangeFilter{After: start})
	for _, ch := range changes {
		got = append(got, fmt.Sprintf("%s/%s created=%v deleted=%v", ch.Kind, ch.Name, ch.Created, ch.Deleted))
	}
	want := []string{"Machine/m1 created=true deleted=false", "Replica/web-1 created=true deleted=false",
		"Replica/web-2 created=true deleted=false", "Replica/web-1 created=false deleted=false", "Replica/web-2 created=false deleted=true"}
	if !slices.Equal(got, want) {
		t.Fatalf("changes %q, want %q", got, want)
	}
	must(t, s.View(ctx, func(tx store.Tx) error {
		r, err := tx.GetReplica("web-1")
		if err != nil {
			return err
		}
		if r.Machine != "m1" || r.ResourceVersion != changes[3].Revision {
			t.Errorf("web-1 on %q at resourceVersion %d, want m1 at %d", r.Machine, r.ResourceVersion, changes[3].Revision)
		}
		if _, err := tx.GetReplica("web-2"); err == nil {
			t.Error("web-2 was deleted and is still there")
		}
		events, err := tx.ListEvents(store.EventFilter{ObjectKind: "Replica", ObjectName: "web-1"})
		if err != nil {
			return err
		}
		var msgs []string
		for i, e := range events {
			msgs = append(msgs, e.Message)
			if i > 0 && e.ID <= events[i-1].ID {
				t.Errorf("event ids not increasing: %d after %d", e.ID, events[i-1].ID)
			}
		}
		if !slices.Equal(msgs, []string{"first", "second", "third"}) {
			t.Errorf("events %q, want first, second, third", msgs)
		}
		return nil
	}))

	// Written again in a later transaction: no creation.
	must(t, s.Update(ctx, func(tx store.Tx) error {
		return tx.PutReplica(&api.Replica{ID: "web-1", Service: "web", Cluster: "dev"})
	}))
	last := readChanges(t, s, store.ChangeFilter{After: changes[len(changes)-1].Revision})
	if len(last) != 1 || last[0].Created {
		t.Fatalf("a later write of web-1 logged %+v, want one change that is no creation", last)
	}
}
