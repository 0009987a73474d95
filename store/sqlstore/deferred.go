package sqlstore

import (
	"fmt"
	"strings"

	"github.com/gantry-dev/gantry/store"
)

// Commit-time revisions. Where writers run at once (PostgreSQL), a
// revision taken when a change is written could commit after a greater
// one, and a follower that read the greater one would skip it. Taking a
// lock at the first change and holding it to the commit prevents that,
// but makes every transaction that changes something wait for every
// other one from its first change on: under load (10,000 machines
// joining with one token) their serializable snapshots went stale while
// they waited, and they failed on each other until their retries ran
// out. So a transaction writes its changes under provisional revisions
// (negative: they never meet real ones) and only takes the lock just
// before it commits, to renumber them: the lock is held for a few
// statements, and a committer's renumbering touches only its own rows.

// provisional is a change written under a provisional revision.
type provisional struct {
	revision int64
	kind     string
	name     string
	deleted  bool
}

func (f *Feed) deferred() bool { return f.Lock != "" }

// beforeCommit ends a transaction that wrote changes: renumbers them
// (when revisions are deferred) and wakes other servers' followers.
func (t *tx) beforeCommit() error {
	f := &t.dialect.Feed
	if f.deferred() && len(t.provisional) > 0 {
		if err := t.renumber(); err != nil {
			return err
		}
	}
	if f.Notify != "" {
		return t.exec("notify the change feed", f.Notify)
	}
	return nil
}

// renumber takes the feed's lock and gives the transaction's changes,
// in the order they were written, the next revisions; the objects they
// left carry theirs. (An object made and written again in the same
// transaction keeps its provisional created_revision: it only tells a
// later write that it is no creation, which a negative one tells too.)
func (t *tx) renumber() error {
	f := &t.dialect.Feed
	if err := t.exec("lock the change feed", f.Lock); err != nil {
		return err
	}
	provs := make([]int64, len(t.provisional))
	finals := make([]int64, len(t.provisional))
	byTable := map[string][2][]int64{}
	for i, p := range t.provisional {
		if err := t.queryRow(f.Next).Scan(&finals[i]); err != nil {
			return t.dialect.failure("next revision", err)
		}
		provs[i] = p.revision
		if p.deleted {
			continue
		}
		table, _, err := fedTable(p.kind)
		if err != nil {
			return err
		}
		pair := byTable[table]
		byTable[table] = [2][]int64{append(pair[0], p.revision), append(pair[1], finals[i])}
	}
	if err := t.exec("renumber changes", `UPDATE changes c SET revision = m.final, data = `+patchedData("c", "c.kind", "c.deleted = 0")+`
		FROM unnest(?::bigint[], ?::bigint[]) AS m(prov, final) WHERE c.revision = m.prov`, provs, finals); err != nil {
		return err
	}
	for table, pair := range byTable {
		data := "" // memory's values carry no revision
		if table != "memory" {
			data = "data = " + patchedData("t", "'"+kindOfTable(table)+"'", "TRUE") + ","
		}
		if err := t.exec("renumber "+table, `UPDATE `+table+` t SET revision = m.final, `+data+`
			created_revision = CASE WHEN t.created_revision = m.prov THEN m.final ELSE t.created_revision END
			FROM unnest(?::bigint[], ?::bigint[]) AS m(prov, final) WHERE t.revision = m.prov`, pair[0], pair[1]); err != nil {
			return err
		}
	}
	last := finals[len(finals)-1]
	if f.PruneEvery > 0 && last/f.PruneEvery != (finals[0]-1)/f.PruneEvery {
		return t.pruneChanges(f.Now().UnixNano()-f.Retention.Nanoseconds(), last)
	}
	return nil
}

// patchedData is the SQL of a row's document with its resourceVersion
// set to m.final, for the kinds whose document carries one (kind is the
// SQL of the row's kind, when a condition that must hold too).
func patchedData(row, kind, when string) string {
	return fmt.Sprintf(`CASE WHEN %[3]s AND %[2]s IN ('%[4]s') THEN jsonb_set(%[1]s.data::jsonb, '{metadata,resourceVersion}', to_jsonb(m.final::text))::text
		WHEN %[3]s AND %[2]s IN ('%[5]s') THEN jsonb_set(%[1]s.data::jsonb, '{resourceVersion}', to_jsonb(m.final::text))::text
		ELSE %[1]s.data END`, row, kind, when, strings.Join(metaKinds(), "', '"), strings.Join(topLevelKinds(), "', '"))
}

// metaKinds carry their resourceVersion in metadata, topLevelKinds at
// the top of their document.
func metaKinds() []string {
	return []string{store.FeedCluster, store.FeedService, store.FeedFailoverGroup}
}

func topLevelKinds() []string { return []string{store.FeedMachine, store.FeedReplica} }

// kindOfTable is the kind whose objects a table holds.
func kindOfTable(table string) string {
	for _, kind := range append(append(metaKinds(), topLevelKinds()...), store.FeedMemory) {
		if t, _, _ := fedTable(kind); t == table {
			return kind
		}
	}
	return ""
}
