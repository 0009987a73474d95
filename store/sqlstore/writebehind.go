package sqlstore

import (
	"fmt"
	"strings"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/store"
)

// Write-behind. Where a round trip to the database costs more than the
// statement (PostgreSQL), a transaction's replica writes and events are
// kept in memory and sent in one statement each: before the first
// statement that reads or writes their table, and before the commit. The
// control loop's pass that made 10,000 replicas sent about six statements
// for each (its row, its events, and reads of what it had just written);
// held back, the writes go in a handful of statements.
//
// A replica written twice before they are sent is sent once, with its
// last state and revision; its first write's change is still logged
// (each write keeps its place in the change log), and the row keeps the
// first write's provisional created_revision, as a row made and written
// again in one transaction does (renumber).

// WriteBehind holds the statements of the write-behind; a Dialect whose
// WriteBehind is nil sends every write as it is made (SQLite: its writes
// cost no round trip).
type WriteBehind struct {
	// Replicas upserts replicas from seven arrays (id, cluster, service,
	// machine, previous_machine, data, revision, created_revision) and
	// returns each row's id and created_revision.
	Replicas string
	// Events inserts events from three arrays (object_kind, object_name,
	// data) and returns their ids, in order.
	Events string
}

// pendingReplica is a replica write not sent yet (its columns copied: the
// caller may change its object after the write); changes are the indexes
// of its writes' changes in tx.provisional.
type pendingReplica struct {
	data              string
	rev, createdRev   int64
	changes           []int
	cluster, service  string
	machine, previous string
}

type writeBehind struct {
	replicas map[string]*pendingReplica
	order    []string // replica ids, in the order first written
	events   []*api.Event
	data     []string // the events' documents
}

func (t *tx) writesBehind() bool { return t.dialect.WriteBehind != nil && t.dialect.Feed.deferred() }

// putReplicaBehind keeps a replica write for the next flush.
func (t *tx) putReplicaBehind(r *api.Replica) error {
	rev, err := t.nextRevision()
	if err != nil {
		return err
	}
	v := *r
	v.ResourceVersion = rev
	data, err := encode(&v)
	if err != nil {
		return fmt.Errorf("encode replica %q: %w", r.ID, err)
	}
	wb := &t.behind
	if wb.replicas == nil {
		wb.replicas = map[string]*pendingReplica{}
	}
	p := wb.replicas[r.ID]
	if p == nil {
		p = &pendingReplica{createdRev: rev}
		wb.replicas[r.ID] = p
		wb.order = append(wb.order, r.ID)
	}
	p.data, p.rev = data, rev
	p.cluster, p.service, p.machine, p.previous = r.Cluster, r.Service, r.Machine, r.PreviousMachine
	p.changes = append(p.changes, len(t.provisional))
	// Created is known once the row is sent (flushReplicas).
	return t.record(store.Change{Revision: rev, Kind: store.FeedReplica, Name: r.ID, Data: []byte(data)})
}

// addEventBehind keeps an event for the next flush.
func (t *tx) addEventBehind(e *api.Event) error {
	data, err := encode(e)
	if err != nil {
		return err
	}
	t.behind.events = append(t.behind.events, e)
	t.behind.data = append(t.behind.data, data)
	return nil
}

// flushFor sends what is held back that query may read or write (by the
// tables it names).
func (t *tx) flushFor(query string) error {
	wb := &t.behind
	if len(wb.order) > 0 && strings.Contains(query, "replicas") {
		if err := t.flushReplicas(); err != nil {
			return err
		}
	}
	if len(wb.events) > 0 && strings.Contains(query, "events") {
		return t.flushEvents()
	}
	return nil
}

// flush sends everything held back (before the commit).
func (t *tx) flush() error {
	if err := t.flushReplicas(); err != nil {
		return err
	}
	return t.flushEvents()
}

func (t *tx) flushReplicas() error {
	wb := &t.behind
	n := len(wb.order)
	if n == 0 {
		return nil
	}
	ids, clusters, services, machines, previous, data := make([]string, n), make([]string, n), make([]string, n),
		make([]string, n), make([]string, n), make([]string, n)
	revs, createdRevs := make([]int64, n), make([]int64, n)
	for i, id := range wb.order {
		p := wb.replicas[id]
		ids[i], clusters[i], services[i], machines[i], previous[i], data[i] = id, p.cluster, p.service, p.machine, p.previous, p.data
		revs[i], createdRevs[i] = p.rev, p.createdRev
	}
	pending := wb.replicas
	wb.replicas, wb.order = nil, nil
	rows, err := t.run(t.dialect.WriteBehind.Replicas, ids, clusters, services, machines, previous, data, revs, createdRevs)
	if err != nil {
		return t.dialect.failure(fmt.Sprintf("put %d replicas", n), err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var createdAt int64
		if err := rows.Scan(&id, &createdAt); err != nil {
			return t.dialect.failure(fmt.Sprintf("put %d replicas", n), err)
		}
		if p := pending[id]; p != nil && createdAt == p.createdRev {
			t.provisional[p.changes[0]].Created = true
		}
	}
	if err := rows.Err(); err != nil {
		return t.dialect.failure(fmt.Sprintf("put %d replicas", n), err)
	}
	return nil
}

func (t *tx) flushEvents() error {
	wb := &t.behind
	n := len(wb.events)
	if n == 0 {
		return nil
	}
	kinds, names := make([]string, n), make([]string, n)
	for i, e := range wb.events {
		kinds[i], names[i] = e.ObjectKind, e.ObjectName
	}
	events, data := wb.events, wb.data
	wb.events, wb.data = nil, nil
	rows, err := t.run(t.dialect.WriteBehind.Events, kinds, names, data)
	if err != nil {
		return t.dialect.failure(fmt.Sprintf("add %d events", n), err)
	}
	defer rows.Close()
	i := 0
	for ; rows.Next() && i < n; i++ {
		if err := rows.Scan(&events[i].ID); err != nil {
			return t.dialect.failure(fmt.Sprintf("add %d events", n), err)
		}
	}
	if err := rows.Err(); err != nil {
		return t.dialect.failure(fmt.Sprintf("add %d events", n), err)
	}
	if i != n {
		return fmt.Errorf("add %d events: %d ids returned", n, i)
	}
	t.eventsAdded(events[0].ID, events[n-1].ID)
	return nil
}
