package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/client"
	"github.com/gantry-dev/gantry/decide"
	"github.com/gantry-dev/gantry/store"
)

// withoutPasses keeps the control loop from passing after its first pass
// (a pass deletes the replicas putReplicas writes: they have no service).
func withoutPasses(c *Config) { c.Controller.Interval = time.Hour }

func (ts *testServer) putReplicas(t *testing.T, service string, n, round int) {
	t.Helper()
	err := ts.store.Update(context.Background(), func(tx store.Tx) error {
		for i := range n {
			r := &api.Replica{ID: fmt.Sprintf("%s-%d", service, i), Service: service, Cluster: "nowhere", Incarnation: fmt.Sprint(round)}
			if err := tx.PutReplica(r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func (ts *testServer) revision(t *testing.T) int64 {
	t.Helper()
	var rev int64
	if err := ts.store.View(context.Background(), func(tx store.Tx) error {
		var err error
		rev, err = tx.Revision()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return rev
}

// newestChange is the revision of the newest change of a kind.
func (ts *testServer) newestChange(t *testing.T, kind string) int64 {
	t.Helper()
	var rev int64
	if err := ts.store.View(context.Background(), func(tx store.Tx) error {
		changes, err := tx.Changes(store.ChangeFilter{Kinds: []string{kind}, Limit: 100000})
		if len(changes) > 0 {
			rev = changes[len(changes)-1].Revision
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return rev
}

type seenChange struct {
	rev  int64
	name string
	typ  string
}

// A watcher that drops its stream at random points and resumes after
// the last revision it saw gets every change of its kind once, in order:
// the same sequence as the feed.
func TestWatchResumesWithoutLossOrRepeat(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	ts := startServer(t, withoutPasses)
	ctx := context.Background()
	ts.putReplicas(t, "other", 1, 0) // from revision 0 a watch would list first
	start := ts.revision(t)

	writes := make(chan struct{})
	go func() {
		defer close(writes)
		for round := range 40 {
			ts.putReplicas(t, "web", 5, round)
			if round%10 == 9 {
				if err := ts.store.Update(ctx, func(tx store.Tx) error { return tx.DeleteReplica("web-4") }); err != nil {
					t.Error(err)
				}
			}
		}
	}()

	var seen []seenChange
	from, target := start, int64(-1)
	for target < 0 || from < target {
		select {
		case <-writes:
			target = ts.newestChange(t, store.FeedReplica)
		default:
		}
		stopAfter := 1 + rng.IntN(30)
		n := 0
		// Once the writes are over, the last round may wait for changes
		// that never come: it ends with its context.
		roundCtx, cancel := context.WithTimeout(ctx, time.Second)
		err := ts.admin.Watch(roundCtx, "/v1/replicas?service=web", client.WatchOptions{From: from}, func(e api.WatchEvent) error {
			if e.Type == api.WatchBookmark {
				return nil
			}
			var r api.Replica
			if err := json.Unmarshal(e.Object, &r); err != nil {
				return err
			}
			seen = append(seen, seenChange{e.ResourceVersion, r.ID, e.Type})
			from = e.ResourceVersion
			if n++; n == stopAfter {
				return client.ErrStop
			}
			return nil
		})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}

	var want []seenChange
	if err := ts.store.View(ctx, func(tx store.Tx) error {
		changes, err := tx.Changes(store.ChangeFilter{After: start, Kinds: []string{store.FeedReplica}, Limit: 10000})
		for _, c := range changes {
			// The controller deletes these orphans as it finds them: its
			// deletions are in the feed too, and may come after the last
			// change the watcher read (from), where it stopped.
			if c.Revision <= from && (watchFilter{Service: "web"}).matches(c.Data) {
				want = append(want, seenChange{c.Revision, c.Name, eventType(c)})
			}
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(want) < 200 {
		t.Fatalf("only %d changes in the feed", len(want))
	}
	if !slices.Equal(seen, want) {
		i := firstDifference(seen, want)
		t.Fatalf("the watcher saw %d changes, the feed holds %d; first difference at %d: %+v, feed %+v", len(seen), len(want), i, seen[i:], want[i:])
	}
	types := map[string]int{}
	for _, c := range seen {
		types[c.typ]++
	}
	if types[api.WatchAdded] < 8 || types[api.WatchModified] == 0 || types[api.WatchDeleted] < 4 {
		t.Errorf("events by type %v, want at least 8 ADDED, some MODIFIED and 4 DELETED", types)
	}
}

func firstDifference(a, b []seenChange) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// A watcher behind the kept changes is told (410, expired); watching
// from 0 gives it every current object, then the changes after them.
func TestWatchTooFarBehindIsToldToListAgain(t *testing.T) {
	ts := startServer(t, func(c *Config) { withoutPasses(c); c.Store.SQLite.ChangeRetention = time.Nanosecond })
	ctx := context.Background()
	for round := range 30 {
		ts.putReplicas(t, "web", 5, round)
	}
	err := ts.admin.Watch(ctx, "/v1/replicas", client.WatchOptions{From: 1}, func(api.WatchEvent) error { return nil })
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusGone || apiErr.Code != api.ErrorExpired {
		t.Fatalf("a watch from revision 1 after compaction: %v, want 410 expired", err)
	}

	var added []string
	var listRev int64
	err = ts.admin.Watch(ctx, "/v1/replicas", client.WatchOptions{}, func(e api.WatchEvent) error {
		switch e.Type {
		case api.WatchAdded:
			var r api.Replica
			if err := json.Unmarshal(e.Object, &r); err != nil {
				return err
			}
			added = append(added, r.ID)
		case api.WatchBookmark:
			listRev = e.ResourceVersion
			return client.ErrStop
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"web-0", "web-1", "web-2", "web-3", "web-4"}; !slices.Equal(added, want) || listRev != ts.revision(t) {
		t.Fatalf("watch from 0: added %v at %d, want %v at %d", added, listRev, want, ts.revision(t))
	}
	ts.putReplicas(t, "web", 1, 99)
	var next api.WatchEvent
	err = ts.admin.Watch(ctx, "/v1/replicas", client.WatchOptions{From: listRev}, func(e api.WatchEvent) error {
		next = e
		return client.ErrStop
	})
	if err != nil || next.Type != api.WatchModified || next.ResourceVersion != listRev+1 {
		t.Fatalf("the change after the list: %+v %v", next, err)
	}
}

// A write that names the resourceVersion it read is refused once the
// object changed (409, field named) and changes nothing.
func TestConditionalWrites(t *testing.T) {
	ts, ctx := withTestCluster(t, nil)
	const svc = "kind: Service\nmetadata: {name: web%s}\nspec: {cluster: dev, replicas: %d, command: [sleep, '600'], resources: {cpu: 100m, memory: 64Mi}}\n"
	if _, err := ts.admin.Apply(ctx, fmt.Appendf(nil, svc, "", 1)); err != nil {
		t.Fatal(err)
	}
	read, err := ts.admin.GetService(ctx, "web")
	if err != nil || read.Metadata.ResourceVersion == 0 {
		t.Fatalf("get: %+v %v", read, err)
	}
	at := fmt.Sprintf(", resourceVersion: '%d'", read.Metadata.ResourceVersion)
	if _, err := ts.admin.Apply(ctx, fmt.Appendf(nil, svc, at, 2)); err != nil {
		t.Fatalf("a write at the revision read: %v", err)
	}
	_, err = ts.admin.Apply(ctx, fmt.Appendf(nil, svc, at, 3))
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusConflict || apiErr.Field != "metadata.resourceVersion" {
		t.Fatalf("a write at a stale revision: %v, want 409 on metadata.resourceVersion", err)
	}
	now, err := ts.admin.GetService(ctx, "web")
	if err != nil || now.Spec.Replicas == nil || *now.Spec.Replicas != 2 {
		t.Fatalf("after the refused write: %+v %v, want 2 replicas", now, err)
	}
	status, body := ts.do(t, http.MethodPut, "/v1/services/web", ts.AdminToken(), "application/yaml", fmt.Appendf(nil, svc, at, 4))
	if status != http.StatusConflict || body.Error.Field != "metadata.resourceVersion" {
		t.Fatalf("PUT at a stale revision: %d %+v", status, body)
	}
}

// Lists come in pages that chain by their continue token, each with the
// first page's revision.
func TestListPages(t *testing.T) {
	ts := startServer(t, withoutPasses)
	ts.putReplicas(t, "a", 4, 0)
	ts.putReplicas(t, "b", 3, 0)
	var ids []string
	var revs []int64
	cont := ""
	for pages := 0; ; pages++ {
		var page struct {
			Metadata api.ListMeta
			Items    []api.Replica
		}
		getList(t, ts, "/v1/replicas?limit=3&continue="+cont, &page)
		for _, r := range page.Items {
			ids = append(ids, r.ID)
		}
		revs = append(revs, page.Metadata.ResourceVersion)
		if page.Metadata.Continue == "" {
			break
		}
		cont = page.Metadata.Continue
		ts.putReplicas(t, "c", 1, pages) // a write between pages
		if pages > 5 {
			t.Fatal("pages do not end")
		}
	}
	if want := []string{"a-0", "a-1", "a-2", "a-3", "b-0", "b-1", "b-2", "c-0"}; !slices.Equal(ids, want) {
		t.Errorf("replicas page by page: %v, want %v", ids, want)
	}
	if slices.Compact(slices.Clone(revs))[0] != revs[0] || len(slices.Compact(slices.Clone(revs))) != 1 || revs[0] == 0 {
		t.Errorf("page revisions %v, want the first page's on every page", revs)
	}
	status, body := ts.do(t, http.MethodGet, "/v1/replicas?continue=garbage", ts.AdminToken(), "", nil)
	if status != http.StatusBadRequest || body.Error.Field != "continue" {
		t.Errorf("a made-up continue token: %d %+v", status, body)
	}
}

func getList(t *testing.T, ts *testServer, path string, out any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, ts.URL()+path, nil)
	req.Header.Set("Authorization", "Bearer "+ts.AdminToken())
	resp, err := ts.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, data)
	}
	if err := json.NewDecoder(strings.NewReader(string(data))).Decode(out); err != nil {
		t.Fatal(err)
	}
}

// A service's status lives in the control loop's memory: a change there
// reaches a watch of services as a MODIFIED of the service; memory of
// nothing watched sends nothing.
func TestServiceWatchSeesItsDeploymentsProgress(t *testing.T) {
	ts, ctx := withTestCluster(t, nil)
	if _, err := ts.admin.Apply(ctx, []byte("kind: Service\nmetadata: {name: web}\nspec: {cluster: dev, replicas: 0, command: [sleep, '600']}\n")); err != nil {
		t.Fatal(err)
	}
	from := ts.revision(t)
	write := func(key, value string) {
		if err := ts.store.Update(ctx, func(tx store.Tx) error { return tx.PutMemory(key, value) }); err != nil {
			t.Fatal(err)
		}
	}
	write("unrelated/web", "x")
	write(decide.DeploymentKey("web"), `{"number": 99}`)
	// The controller writes memory too: find the revisions of these two.
	revs := map[string]int64{}
	if err := ts.store.View(ctx, func(tx store.Tx) error {
		changes, err := tx.Changes(store.ChangeFilter{After: from, Kinds: []string{store.FeedMemory}, Limit: 10000})
		for _, c := range changes {
			if string(c.Data) == "x" || string(c.Data) == `{"number": 99}` {
				revs[c.Name] = c.Revision
			}
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	unrelated, deployment := revs["unrelated/web"], revs[decide.DeploymentKey("web")]
	if unrelated == 0 || deployment == 0 {
		t.Fatalf("memory changes not found: %v", revs)
	}
	var got *api.WatchEvent
	err := ts.admin.Watch(ctx, "/v1/services", client.WatchOptions{From: from}, func(e api.WatchEvent) error {
		switch e.ResourceVersion {
		case unrelated:
			t.Errorf("an unrelated memory entry was sent: %+v", e)
		case deployment:
			got = &e
			return client.ErrStop
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var svc api.Service
	if err := json.Unmarshal(got.Object, &svc); err != nil || got.Type != api.WatchModified || svc.Metadata.Name != "web" {
		t.Fatalf("the deployment's change: %+v (%v), want web MODIFIED", got, err)
	}
}

// A numbered page (limit and offset, as the dashboard reads) says how
// many replicas follow it; an offset without a limit, or with a
// continue token, is refused naming the parameter.
func TestReplicasPageByOffsetCountsTheRest(t *testing.T) {
	// The control loop deletes replicas of no service: its first pass is
	// over before they are written, and the next an hour away.
	ts := startServer(t, withoutPasses)
	ctx := context.Background()
	ts.putReplicas(t, "web", 7, 0)
	items, total, err := ts.admin.ListReplicasWindow(ctx, client.ReplicaQuery{Service: "web"}, 3, 3)
	if err != nil || total != 7 || len(items) != 3 || items[0].ID != "web-3" {
		t.Fatalf("offset 3, limit 3: %d replicas from %v of %d, %v; want web-3.. of 7", len(items), firstID(items), total, err)
	}
	for _, bad := range []string{"/v1/replicas?offset=2", "/v1/replicas?limit=2&offset=-1", "/v1/replicas?limit=2&offset=2&continue=x"} {
		if status, eb := ts.do(t, "GET", bad, ts.AdminToken(), "", nil); status != 400 || eb.Error.Field != "offset" && eb.Error.Field != "continue" {
			t.Errorf("%s: %d %+v, want 400 naming offset", bad, status, eb.Error)
		}
	}
}

// A list of replicas is answered from the server's view, brought to the
// store's latest commit first: replicas written a moment before are in
// it, and neither their rows nor their count is read from the store.
func TestReplicaListsAreAnsweredFromTheView(t *testing.T) {
	var reads atomic.Int64
	ts := startServer(t, func(c *Config) {
		withoutPasses(c)
		c.WrapStore = func(s store.Store) store.Store {
			return replicaReadsStore{Store: s, reads: &reads, counted: func(f store.ReplicaFilter) bool { return !wholeList(f) || f.Limit > 0 || len(f.After) > 0 }}
		}
	})
	ctx := context.Background()
	for round := range 3 {
		ts.putReplicas(t, "web", 4*(round+1), round)
		items, total, err := ts.admin.ListReplicasWindow(ctx, client.ReplicaQuery{Service: "web"}, 1, 2)
		if err != nil || total != 4*(round+1) || len(items) != 2 || items[0].ID != "web-1" {
			t.Fatalf("round %d: %d replicas from %v of %d, %v; want 2 from web-1 of %d", round, len(items), firstID(items), total, err, 4*(round+1))
		}
	}
	if n := reads.Load(); n != 0 {
		t.Fatalf("%d reads of the replicas' rows or count in the store", n)
	}
}

// Machines come in numbered pages too (the dashboard's machines page
// reads only the one it shows), by id, with the count of those after it.
func TestMachinesPageByOffsetCountsTheRest(t *testing.T) {
	ts := startServer(t, withoutPasses) // machines of no cluster stay
	ctx := context.Background()
	err := ts.store.Update(ctx, func(tx store.Tx) error {
		for i := range 7 {
			m := &api.Machine{ID: fmt.Sprintf("m%d", i), Cluster: "nowhere", JoinState: api.JoinJoined, FleetState: api.FleetReady}
			if err := tx.PutMachine(m); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	items, total, err := ts.admin.ListMachinesWindow(ctx, "nowhere", 5, 3)
	if err != nil || total != 7 || len(items) != 2 || items[0].ID != "m5" {
		t.Fatalf("offset 5, limit 3: %d machines of %d, %v; want m5 and m6 of 7", len(items), total, err)
	}
	if status, eb := ts.do(t, "GET", "/v1/machines?offset=2", ts.AdminToken(), "", nil); status != 400 || eb.Error.Field != "offset" {
		t.Errorf("an offset with no limit: %d %+v, want 400 naming offset", status, eb.Error)
	}
}

func firstID(rs []api.Replica) string {
	if len(rs) == 0 {
		return ""
	}
	return rs[0].ID
}
