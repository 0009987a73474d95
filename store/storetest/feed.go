package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/store"
)

// RunFeed exercises the change feed of fresh, empty stores made by open,
// which keeps changes for retention.
func RunFeed(t *testing.T, open func(t *testing.T, retention time.Duration) store.Store) {
	hour := func(t *testing.T) store.Store { return open(t, time.Hour) }
	t.Run("RevisionsFollowWrites", func(t *testing.T) { testRevisions(t, hour(t)) })
	t.Run("DeletionsLeaveTombstones", func(t *testing.T) { testTombstones(t, hour(t)) })
	t.Run("ChangesByKindAndPage", func(t *testing.T) { testChangesFilter(t, hour(t)) })
	t.Run("ConditionalWrites", func(t *testing.T) { testCheckVersion(t, hour(t)) })
	t.Run("Compaction", func(t *testing.T) { testCompaction(t, open(t, time.Nanosecond)) })
	t.Run("FollowersSeeEveryCommitInOrder", func(t *testing.T) { testFollowConcurrentWriters(t, hour(t)) })
	t.Run("Notifier", func(t *testing.T) { testNotifier(t, hour(t)) })
	t.Run("MemoryChanges", func(t *testing.T) { testMemoryChanges(t, hour(t)) })
	t.Run("ListPages", func(t *testing.T) { testListPages(t, hour(t)) })
	t.Run("WritesReadBackInTheirTransaction", func(t *testing.T) { testWritesReadBackInTheirTransaction(t, hour(t)) })
	t.Run("View", func(t *testing.T) { RunView(t, open) })
}

func readChanges(t *testing.T, s store.Store, f store.ChangeFilter) []store.Change {
	t.Helper()
	var out []store.Change
	must(t, s.View(context.Background(), func(tx store.Tx) error {
		var err error
		out, err = tx.Changes(f)
		return err
	}))
	return out
}

func revision(t *testing.T, s store.Store) int64 {
	t.Helper()
	var rev int64
	must(t, s.View(context.Background(), func(tx store.Tx) error {
		var err error
		rev, err = tx.Revision()
		return err
	}))
	return rev
}

// Every write of a fed kind takes the next revision; the stored object
// carries it, the caller's object does not change, and the store's
// revision is the newest.
func testRevisions(t *testing.T, s store.Store) {
	ctx := context.Background()
	if rev := revision(t, s); rev != 0 {
		t.Fatalf("revision of an empty store: %d", rev)
	}
	c := &api.Cluster{Kind: api.KindCluster, Metadata: api.ObjectMeta{Name: "dev"}}
	svc := &api.Service{Kind: api.KindService, Metadata: api.ObjectMeta{Name: "web"}, Spec: api.ServiceSpec{Cluster: "dev"}}
	m := &api.Machine{ID: "m1", Cluster: "dev", FleetState: api.FleetReady}
	r := &api.Replica{ID: "web-0", Service: "web", Cluster: "dev", Machine: "m1"}
	must(t, s.Update(ctx, func(tx store.Tx) error {
		return errors.Join(tx.PutCluster(c), tx.PutService(svc), tx.CreateMachine(m), tx.PutReplica(r))
	}))
	if c.Metadata.ResourceVersion != 0 || r.ResourceVersion != 0 {
		t.Errorf("the caller's objects changed: cluster %d, replica %d", c.Metadata.ResourceVersion, r.ResourceVersion)
	}
	r.State = api.ReplicaRunning
	must(t, s.Update(ctx, func(tx store.Tx) error { return tx.PutReplica(r) }))

	changes := readChanges(t, s, store.ChangeFilter{})
	var got []string
	for i, ch := range changes {
		got = append(got, fmt.Sprintf("%s/%s created=%v", ch.Kind, ch.Name, ch.Created))
		if i > 0 && ch.Revision <= changes[i-1].Revision {
			t.Errorf("revisions not increasing: %d after %d", ch.Revision, changes[i-1].Revision)
		}
		var meta struct {
			ResourceVersion string `json:"resourceVersion"`
			Metadata        struct {
				ResourceVersion string `json:"resourceVersion"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(ch.Data, &meta); err != nil {
			t.Fatalf("change data %s: %v", ch.Data, err)
		}
		if v := meta.ResourceVersion + meta.Metadata.ResourceVersion; v != fmt.Sprint(ch.Revision) {
			t.Errorf("%s/%s: data at resourceVersion %q, change at %d", ch.Kind, ch.Name, v, ch.Revision)
		}
	}
	want := []string{"Cluster/dev created=true", "Service/web created=true", "Machine/m1 created=true", "Replica/web-0 created=true", "Replica/web-0 created=false"}
	if !slices.Equal(got, want) {
		t.Fatalf("changes %q, want %q", got, want)
	}
	last := changes[len(changes)-1].Revision
	if rev := revision(t, s); rev != last {
		t.Errorf("store revision %d, newest change %d", rev, last)
	}
	must(t, s.View(ctx, func(tx store.Tx) error {
		got, err := tx.GetReplica("web-0")
		if err == nil && got.ResourceVersion != last {
			t.Errorf("replica read at resourceVersion %d, want %d", got.ResourceVersion, last)
		}
		cl, err2 := tx.GetCluster("dev")
		if err2 == nil && cl.Metadata.ResourceVersion != changes[0].Revision {
			t.Errorf("cluster read at resourceVersion %d, want %d", cl.Metadata.ResourceVersion, changes[0].Revision)
		}
		return errors.Join(err, err2)
	}))
}

// A deletion is a change of its own, with the object's last state; a
// deletion of nothing is no change.
func testTombstones(t *testing.T, s store.Store) {
	ctx := context.Background()
	g := &api.FailoverGroup{Kind: api.KindFailoverGroup, Metadata: api.ObjectMeta{Name: "pg"}, Spec: api.FailoverGroupSpec{Primary: api.FailoverSide{Cluster: "east"}}}
	must(t, s.Update(ctx, func(tx store.Tx) error { return tx.PutFailoverGroup(g) }))
	before := revision(t, s)
	must(t, s.Update(ctx, func(tx store.Tx) error {
		return errors.Join(tx.DeleteFailoverGroup("pg"), tx.DeleteFailoverGroup("pg"), tx.DeleteService("never-was"))
	}))
	changes := readChanges(t, s, store.ChangeFilter{After: before})
	if len(changes) != 1 || !changes[0].Deleted || changes[0].Kind != store.FeedFailoverGroup || changes[0].Name != "pg" {
		t.Fatalf("changes after the deletion: %+v", changes)
	}
	var last api.FailoverGroup
	if err := json.Unmarshal(changes[0].Data, &last); err != nil || last.Spec.Primary.Cluster != "east" {
		t.Errorf("tombstone holds %s (%v), want the group's last state", changes[0].Data, err)
	}
	if rev := revision(t, s); rev != changes[0].Revision {
		t.Errorf("store revision %d after the deletion at %d", rev, changes[0].Revision)
	}
}

func testChangesFilter(t *testing.T, s store.Store) {
	ctx := context.Background()
	must(t, s.Update(ctx, func(tx store.Tx) error {
		for i := range 5 {
			if err := tx.PutReplica(&api.Replica{ID: fmt.Sprintf("r%d", i), Service: "web", Cluster: "dev"}); err != nil {
				return err
			}
			if err := tx.PutService(&api.Service{Metadata: api.ObjectMeta{Name: fmt.Sprintf("s%d", i)}}); err != nil {
				return err
			}
		}
		return nil
	}))
	all := readChanges(t, s, store.ChangeFilter{})
	if len(all) != 10 {
		t.Fatalf("%d changes, want 10", len(all))
	}
	replicas := readChanges(t, s, store.ChangeFilter{Kinds: []string{store.FeedReplica}})
	if len(replicas) != 5 || replicas[0].Name != "r0" || replicas[4].Name != "r4" {
		t.Errorf("replica changes: %+v", replicas)
	}
	page := readChanges(t, s, store.ChangeFilter{After: all[2].Revision, Limit: 3})
	if len(page) != 3 || page[0].Revision != all[3].Revision || page[2].Revision != all[5].Revision {
		t.Errorf("a page of 3 after the third change: %+v", page)
	}
}

func testCheckVersion(t *testing.T, s store.Store) {
	ctx := context.Background()
	check := func(kind, name string, rv int64) error {
		return s.View(ctx, func(tx store.Tx) error { return tx.CheckVersion(kind, name, rv) })
	}
	if err := check(store.FeedService, "web", 0); err != nil {
		t.Errorf("a missing object checked at 0: %v", err)
	}
	if err := check(store.FeedService, "web", 7); !errors.Is(err, store.ErrConflict) {
		t.Errorf("a missing object checked at 7: %v, want ErrConflict", err)
	}
	must(t, s.Update(ctx, func(tx store.Tx) error { return tx.PutService(&api.Service{Metadata: api.ObjectMeta{Name: "web"}}) }))
	rv := revision(t, s)
	if err := check(store.FeedService, "web", rv); err != nil {
		t.Errorf("checked at its own revision %d: %v", rv, err)
	}
	if err := check(store.FeedService, "web", 0); !errors.Is(err, store.ErrConflict) {
		t.Errorf("an existing object checked at 0: %v, want ErrConflict", err)
	}
	must(t, s.Update(ctx, func(tx store.Tx) error { return tx.PutService(&api.Service{Metadata: api.ObjectMeta{Name: "web"}}) }))
	err := s.Update(ctx, func(tx store.Tx) error {
		if err := tx.CheckVersion(store.FeedService, "web", rv); err != nil {
			return err
		}
		return tx.PutService(&api.Service{Metadata: api.ObjectMeta{Name: "web", Labels: map[string]string{"lost": "update"}}})
	})
	if !errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrUnavailable) {
		t.Errorf("a write conditional on an older revision: %v, want ErrConflict", err)
	}
	must(t, s.View(ctx, func(tx store.Tx) error {
		got, err := tx.GetService("web")
		if err == nil && got.Metadata.Labels["lost"] != "" {
			t.Errorf("the refused write was stored: %+v", got.Metadata)
		}
		return err
	}))
	if err := check("Secret", "x", 0); err == nil {
		t.Errorf("a kind outside the feed was checked")
	}
}

// Changes older than the retention go (all but the newest); a reader
// behind them is told to list again, and the store's revision stays.
func testCompaction(t *testing.T, s store.Store) {
	ctx := context.Background()
	for i := range 120 {
		must(t, s.Update(ctx, func(tx store.Tx) error {
			return tx.PutReplica(&api.Replica{ID: fmt.Sprintf("r%d", i%7), Service: "web", Cluster: "dev"})
		}))
	}
	rev := revision(t, s)
	err := s.View(ctx, func(tx store.Tx) error {
		_, err := tx.Changes(store.ChangeFilter{})
		return err
	})
	if !errors.Is(err, store.ErrCompacted) {
		t.Fatalf("changes from 0 after compaction: %v, want ErrCompacted", err)
	}
	tail := readChanges(t, s, store.ChangeFilter{After: rev - 1})
	if len(tail) != 1 || tail[0].Revision != rev {
		t.Errorf("the newest change after compaction: %+v (store at %d)", tail, rev)
	}
	if got := readChanges(t, s, store.ChangeFilter{After: rev}); len(got) != 0 {
		t.Errorf("changes after the newest: %+v", got)
	}
}

// Writers commit at once while a follower reads the feed after the last
// revision it saw: the follower misses nothing and sees each change
// once, in order (a revision taken before another but committed after it
// would be skipped).
func testFollowConcurrentWriters(t *testing.T, s store.Store) {
	ctx := context.Background()
	const writers, writes = 6, 40
	var wg sync.WaitGroup
	done := make(chan struct{})
	for w := range writers {
		wg.Go(func() {
			for i := range writes {
				err := s.Update(ctx, func(tx store.Tx) error {
					if err := tx.PutReplica(&api.Replica{ID: fmt.Sprintf("w%d-%d", w, i), Service: "web", Cluster: "dev"}); err != nil {
						return err
					}
					time.Sleep(time.Duration(i%3) * time.Millisecond) // hold the transaction open a while
					return tx.PutMachine(&api.Machine{ID: fmt.Sprintf("m%d", w), Cluster: "dev"})
				})
				if err != nil {
					t.Errorf("writer %d: %v", w, err)
					return
				}
			}
		})
	}
	go func() { wg.Wait(); close(done) }()
	var seen []store.Change
	var after int64
	for finished := false; !finished; {
		select {
		case <-done:
			finished = true
		default:
		}
		for _, c := range readChanges(t, s, store.ChangeFilter{After: after}) {
			seen = append(seen, c)
			after = c.Revision
		}
	}
	seen = append(seen, readChanges(t, s, store.ChangeFilter{After: after})...)
	all := readChanges(t, s, store.ChangeFilter{Limit: 10 * writers * writes})
	if len(all) != 2*writers*writes {
		t.Fatalf("%d changes in the feed, want %d", len(all), 2*writers*writes)
	}
	if len(seen) != len(all) {
		t.Fatalf("the follower saw %d changes, the feed holds %d", len(seen), len(all))
	}
	for i := range all {
		if seen[i].Revision != all[i].Revision || seen[i].Name != all[i].Name {
			t.Fatalf("change %d: follower saw %d %s, feed holds %d %s", i, seen[i].Revision, seen[i].Name, all[i].Revision, all[i].Name)
		}
	}
}

func testNotifier(t *testing.T, s store.Store) {
	ctx := context.Background()
	rev := revision(t, s)
	woke := make(chan error, 1)
	go func() { woke <- store.WaitForChange(ctx, s, s, rev) }()
	select {
	case err := <-woke:
		t.Fatalf("woke before any change: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	fired := s.Fired()
	must(t, s.Update(ctx, func(tx store.Tx) error { return tx.PutCluster(&api.Cluster{Metadata: api.ObjectMeta{Name: "dev"}}) }))
	select {
	case err := <-woke:
		must(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("a follower was not woken by a commit")
	}
	if s.Fired() == fired {
		t.Fatal("Fired did not move with a commit of this server: a reader of a view would not know it is behind")
	}
}

func testListPages(t *testing.T, s store.Store) {
	ctx := context.Background()
	must(t, s.Update(ctx, func(tx store.Tx) error {
		for i := range 7 {
			svc := []string{"api", "web"}[i%2]
			if err := tx.PutReplica(&api.Replica{ID: fmt.Sprintf("%s-%d", svc, i), Service: svc, Cluster: "dev"}); err != nil {
				return err
			}
			if err := tx.PutMachine(&api.Machine{ID: fmt.Sprintf("m%d", i), Cluster: "dev"}); err != nil {
				return err
			}
		}
		return tx.PutMachine(&api.Machine{ID: "n0", Cluster: "prod"})
	}))
	var replicas []string
	var after []string
	for {
		var page []*api.Replica
		must(t, s.View(ctx, func(tx store.Tx) error {
			var err error
			page, err = tx.ListReplicas(store.ReplicaFilter{Page: store.Page{Limit: 3, After: after}})
			return err
		}))
		if len(page) > 3 {
			t.Fatalf("a page of %d, limit 3", len(page))
		}
		replicas = append(replicas, replicaIDs(page)...)
		if len(page) < 3 {
			break
		}
		last := page[len(page)-1]
		after = []string{last.Service, last.ID}
	}
	want := []string{"api-0", "api-2", "api-4", "api-6", "web-1", "web-3", "web-5"}
	if !slices.Equal(replicas, want) {
		t.Errorf("replicas page by page: %v, want %v", replicas, want)
	}
	var machines []*api.Machine
	must(t, s.View(ctx, func(tx store.Tx) error {
		var err error
		machines, err = tx.ListMachines(store.MachineFilter{Page: store.Page{Limit: 2, After: []string{"m3"}}})
		return err
	}))
	if got := ids(machines); !slices.Equal(got, []string{"m4", "m5"}) {
		t.Errorf("machines after m3, 2: %v", got)
	}
	var devCount, allCount int
	must(t, s.View(ctx, func(tx store.Tx) error {
		var err error
		dev := store.MachineFilter{Cluster: "dev", Page: store.Page{Limit: 2, Offset: 5}}
		if machines, err = tx.ListMachines(dev); err != nil {
			return err
		}
		if devCount, err = tx.CountMachines(dev); err != nil {
			return err
		}
		allCount, err = tx.CountMachines(store.MachineFilter{})
		return err
	}))
	if got := ids(machines); !slices.Equal(got, []string{"m5", "m6"}) {
		t.Errorf("dev's machines from the sixth, 2: %v, want [m5 m6]", got)
	}
	if devCount != 7 || allCount != 8 {
		t.Errorf("counted %d machines of dev (want 7), %d in all (want 8)", devCount, allCount)
	}
	var third []*api.Replica
	var all, ofWeb int
	must(t, s.View(ctx, func(tx store.Tx) error {
		var err error
		if third, err = tx.ListReplicas(store.ReplicaFilter{Page: store.Page{Limit: 3, Offset: 6}}); err != nil {
			return err
		}
		if all, err = tx.CountReplicas(store.ReplicaFilter{Page: store.Page{Limit: 3}}); err != nil {
			return err
		}
		ofWeb, err = tx.CountReplicas(store.ReplicaFilter{Service: "web"})
		return err
	}))
	if got := replicaIDs(third); !slices.Equal(got, want[6:]) {
		t.Errorf("the third page of 3 by offset: %v, want %v", got, want[6:])
	}
	if all != 7 || ofWeb != 3 {
		t.Errorf("counted %d replicas (want 7), %d of web (want 3)", all, ofWeb)
	}
}

// The control loop's memory is in the feed by value: writing the value
// an entry holds is no change.
func testMemoryChanges(t *testing.T, s store.Store) {
	ctx := context.Background()
	put := func(k, v string) { must(t, s.Update(ctx, func(tx store.Tx) error { return tx.PutMemory(k, v) })) }
	put("deploy/web", "1")
	put("deploy/web", "1")
	put("deploy/web", "2")
	must(t, s.Update(ctx, func(tx store.Tx) error { return tx.DeleteMemory("deploy/web") }))
	var got []string
	for _, c := range readChanges(t, s, store.ChangeFilter{Kinds: []string{store.FeedMemory}}) {
		got = append(got, fmt.Sprintf("%s=%s created=%v deleted=%v", c.Name, c.Data, c.Created, c.Deleted))
	}
	want := []string{"deploy/web=1 created=true deleted=false", "deploy/web=2 created=false deleted=false", "deploy/web=2 created=false deleted=true"}
	if !slices.Equal(got, want) {
		t.Errorf("memory changes %q, want %q", got, want)
	}
}
