package sqlstore

import (
	"fmt"
	"slices"
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
// out. So a transaction writes its objects under provisional revisions
// (negative: they never meet real ones), keeps its changes in memory, and
// only takes the lock just before it commits: it then writes its changes
// to the log with their final revisions and renumbers its objects, found
// by their keys, in a few statements. Nothing in the log is rewritten:
// an UPDATE of rows found through the log's revision index predicate-
// locked index pages that every concurrent writer's provisional rows
// shared, and at 50,000 joining machines the serializable transactions
// failed on each other there.

func (f *Feed) deferred() bool { return f.Lock != "" }

// beforeCommit ends a transaction that wrote changes: logs and renumbers
// them (when revisions are deferred) and wakes other servers' followers.
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

// renumber takes the feed's lock, gives the transaction's changes, in the
// order they were written, the next revisions, logs them, and gives the
// objects they left theirs. (An object made and written again in the same
// transaction keeps its provisional created_revision: it only tells a
// later write that it is no creation, which a negative one tells too.)
func (t *tx) renumber() error {
	f := &t.dialect.Feed
	if err := t.exec("lock the change feed", f.Lock); err != nil {
		return err
	}
	n := len(t.provisional)
	finals, kinds, names, created, deleted, data, at := make([]int64, n), make([]string, n), make([]string, n),
		make([]int64, n), make([]int64, n), make([]string, n), make([]int64, n)
	type renumbering struct {
		provs, finals []int64
		keys          []string
	}
	byTable := map[string]*renumbering{}
	if err := t.nextRevisions(finals); err != nil {
		return err
	}
	for i, c := range t.provisional {
		kinds[i], names[i], created[i], deleted[i], data[i], at[i] = c.Kind, c.Name, int64(boolInt(c.Created)), int64(boolInt(c.Deleted)), string(c.Data), c.At.UnixNano()
		if c.Deleted {
			continue
		}
		table, _, err := fedTable(c.Kind)
		if err != nil {
			return err
		}
		r := byTable[table]
		if r == nil {
			r = &renumbering{}
			byTable[table] = r
		}
		r.provs, r.finals, r.keys = append(r.provs, c.Revision), append(r.finals, finals[i]), append(r.keys, c.Name)
	}
	if err := t.exec("log changes", `INSERT INTO changes(revision, kind, name, created, deleted, data, at)
		SELECT m.final, m.kind, m.name, m.created, m.deleted, `+patchedData("m", "m.kind", "m.deleted = 0")+`, m.at
		FROM unnest(?::bigint[], ?::text[], ?::text[], ?::bigint[], ?::bigint[], ?::text[], ?::bigint[]) AS m(final, kind, name, created, deleted, data, at)`,
		finals, kinds, names, created, deleted, data, at); err != nil {
		return err
	}
	for table, r := range byTable {
		_, key, _ := fedTable(kindOfTable(table))
		patch := "" // memory's values carry no revision
		if table != "memory" {
			patch = "data = " + patchedData("t", "'"+kindOfTable(table)+"'", "TRUE") + ","
		}
		if err := t.exec("renumber "+table, `UPDATE `+table+` t SET revision = m.final, `+patch+`
			created_revision = CASE WHEN t.created_revision = m.prov THEN m.final ELSE t.created_revision END
			FROM unnest(?::bigint[], ?::bigint[], ?::text[]) AS m(prov, final, key) WHERE t.`+key+` = m.key AND t.revision = m.prov`, r.provs, r.finals, r.keys); err != nil {
			return err
		}
	}
	last := finals[n-1]
	if f.PruneEvery > 0 && last/f.PruneEvery != (finals[0]-1)/f.PruneEvery {
		t.prune = &pruning{cutoff: f.Now().UnixNano() - f.Retention.Nanoseconds(), newest: last}
	}
	return nil
}

// nextRevisions fills revs with the feed's next revisions, in order.
func (t *tx) nextRevisions(revs []int64) error {
	f := &t.dialect.Feed
	if f.NextN == "" {
		for i := range revs {
			if err := t.queryRow(f.Next).Scan(&revs[i]); err != nil {
				return t.dialect.failure("next revision", err)
			}
		}
		return nil
	}
	rows, err := t.query(f.NextN, len(revs))
	if err != nil {
		return t.dialect.failure("next revisions", err)
	}
	defer rows.Close()
	got := revs[:0]
	for rows.Next() {
		var rev int64
		if err := rows.Scan(&rev); err != nil {
			return t.dialect.failure("next revisions", err)
		}
		got = append(got, rev)
	}
	if err := rows.Err(); err != nil {
		return t.dialect.failure("next revisions", err)
	}
	if len(got) != len(revs) {
		return fmt.Errorf("next revisions: %d of %d", len(got), len(revs))
	}
	slices.Sort(revs) // the feed's lock is held: nobody else draws from the sequence
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

// maxProvisionalBlock bounds a block of provisional revisions.
const maxProvisionalBlock = 1024

// nextProvisional hands out the transaction's provisional revisions from
// blocks drawn from Provisional, each twice the last: a transaction of
// one change draws one, as before, and one of 10,000 a few blocks.
// Provisional revisions only need to be unique (an object's
// created_revision may stay provisional), which the sequence behind the
// blocks keeps them across transactions.
func (t *tx) nextProvisional() (int64, error) {
	if len(t.provisionals) == 0 {
		t.provisionalBlock = min(max(2*t.provisionalBlock, 1), maxProvisionalBlock)
		rows, err := t.query(t.dialect.Feed.Provisional, t.provisionalBlock)
		if err != nil {
			return 0, t.dialect.failure("provisional revisions", err)
		}
		defer rows.Close()
		for rows.Next() {
			var rev int64
			if err := rows.Scan(&rev); err != nil {
				return 0, t.dialect.failure("provisional revisions", err)
			}
			t.provisionals = append(t.provisionals, rev)
		}
		if err := rows.Err(); err != nil {
			return 0, t.dialect.failure("provisional revisions", err)
		}
		if len(t.provisionals) == 0 {
			return 0, fmt.Errorf("provisional revisions: none drawn")
		}
	}
	rev := t.provisionals[0]
	t.provisionals = t.provisionals[1:]
	return rev, nil
}
