package decide_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/decide"
	"github.com/gantry-dev/gantry/decide/decidetest"
)

// Memory goes to the store as one entry per key and comes back the same;
// Diff writes only what changed.
func TestMemoryRoundTripsThroughEntries(t *testing.T) {
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	m := decide.NewMemory()
	m.Desired["c/g"] = 3
	m.Backoff["c/g"] = decide.Backoff{Failures: 2, Until: at}
	m.Unavailable["small|a|spot"] = at
	m.Conditions["c/ProviderReady"] = api.Condition{Type: api.ConditionProviderReady, Status: "False", Reason: "AuthFailed", LastTransitionTime: at}
	m.Rollouts["c/g"] = decide.Rollout{Since: at, Template: "abc"}
	m.IdleSince["c-g-1"] = at
	m.Terminations["c-g-2"] = decide.Retry{Attempts: 1, Next: at}
	m.Outcomes["o1"] = decide.Outcome{Call: decide.CallLaunch, Cluster: "c", Group: "g", At: at}
	entries, err := m.Entries()
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 8 || entries["desired/c/g"] != "3" {
		t.Fatalf("entries %v", entries)
	}
	back, err := decide.DecodeMemory(entries)
	if err != nil || !back.Equal(m) {
		t.Fatalf("round trip: %+v %v", back, err)
	}
	next := m.Clone()
	next.Desired["c/g"] = 4
	delete(next.IdleSince, "c-g-1")
	put, del, err := decide.Diff(m, next)
	if err != nil || len(put) != 1 || put["desired/c/g"] != "4" || len(del) != 1 || del[0] != "idle/c-g-1" {
		t.Fatalf("diff: put %v del %v %v", put, del, err)
	}
	if _, err := decide.DecodeMemory(map[string]string{"desired/c/g": "many"}); err == nil {
		t.Fatal("a bad entry decoded")
	}
}

// What no longer exists is forgotten: a removed group's desired size and
// backoff, a gone machine's idle time, an expired capacity miss.
func TestMemoryForgetsWhatIsGone(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	mem := decide.NewMemory()
	mem.Desired["gone/g"] = 2
	mem.Backoff["gone/g"] = decide.Backoff{Failures: 1, Until: now.Add(time.Hour)}
	mem.IdleSince["gone-machine"] = now
	mem.Unavailable["t|z|spot"] = now.Add(-time.Second)
	mem.Conditions["gone/ProviderReady"] = api.Condition{Type: api.ConditionProviderReady}
	plan := decide.Decide(decide.DefaultConfig(), &decide.Snapshot{Clusters: map[string]*api.Cluster{}}, mem, now)
	if entries, _ := plan.Memory.Entries(); len(entries) != 0 {
		t.Fatalf("remembered: %v", entries)
	}
}

// Diff puts exactly the entries whose JSON changed: a value deeply
// different but encoded the same (a time with a clock reading, an empty
// map for a nil one) is no write, and a deep change inside a value is.
func TestMemoryDiffPutsWhatTheEntriesChanged(t *testing.T) {
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	old := decide.NewMemory()
	old.IdleSince["m1"] = at
	old.IdleSince["m2"] = at
	old.Deployments["web"] = api.Deployment{Service: "web", Revision: "r1", State: api.DeployProgressing, AvailableSince: map[string]time.Time{"web-0": at}}
	old.Deployments["db"] = api.Deployment{Service: "db", Revision: "r1", State: api.DeployComplete}
	next := old.Clone()
	clock := time.Now()
	next.IdleSince["m1"] = clock.Add(at.Sub(clock)) // the same instant, with a clock reading
	next.IdleSince["m3"] = at
	web := next.Deployments["web"]
	web.AvailableSince = map[string]time.Time{"web-0": at, "web-1": at}
	next.Deployments["web"] = web
	db := next.Deployments["db"]
	db.AvailableSince = map[string]time.Time{} // encoded as the nil one
	next.Deployments["db"] = db
	delete(next.IdleSince, "m2")
	put, del, err := decide.Diff(old, next)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := old.Entries()
	after, _ := next.Entries()
	want := map[string]string{}
	for k, v := range after {
		if before[k] != v {
			want[k] = v
		}
	}
	if len(put) != len(want) || put["idle/m3"] == "" || put["deployment/web"] == "" {
		t.Fatalf("put %v, want %v", put, want)
	}
	for k, v := range want {
		if put[k] != v {
			t.Fatalf("put[%s] = %q, want %q", k, put[k], v)
		}
	}
	if len(del) != 1 || del[0] != "idle/m2" {
		t.Fatalf("deleted %v, want idle/m2", del)
	}
	// ChangedKeys names each of those without encoding, and the entries
	// deeply different that encode the same too.
	changed := map[string]bool{}
	decide.ChangedKeys(old, next, func(key string) { changed[key] = true })
	for k := range put {
		if !changed[k] {
			t.Fatalf("ChangedKeys left out %s, which Diff puts (changed: %v)", k, changed)
		}
	}
	if !changed["idle/m2"] || !changed["idle/m1"] || !changed["deployment/db"] || changed["deployment/none"] || len(changed) != len(put)+3 {
		t.Fatalf("ChangedKeys: %v, want Diff's %v, idle/m2 deleted, and idle/m1 and deployment/db", changed, put)
	}
	decide.ChangedKeys(next, next, func(key string) { t.Fatalf("the same memory changed %s", key) })
}

// A decoder decodes again only the entries that changed since its last
// decode, and its memories are what DecodeMemory gives.
func TestMemoryDecoderReusesWhatDidNotChange(t *testing.T) {
	entries := map[string]string{
		"deployment/web": `{"service":"web","revision":"r1","state":"Progressing","availableSince":{"web-0":"2026-03-04T05:06:07Z"}}`,
		"deployment/db":  `{"service":"db","revision":"r1","state":"Complete"}`,
		"desired/c/g":    "3",
	}
	var d decide.MemoryDecoder
	first, err := d.Decode(entries)
	if err != nil {
		t.Fatal(err)
	}
	entries["desired/c/g"] = "4"
	entries["deployment/db"] = `{"service":"db","revision":"r2","state":"Progressing"}`
	second, err := d.Decode(entries)
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := decide.DecodeMemory(entries)
	if err != nil || !second.Equal(fresh) {
		t.Fatalf("decoded %+v, want %+v (%v)", second, fresh, err)
	}
	if second.Desired["c/g"] != 4 || second.Deployments["db"].Revision != "r2" {
		t.Fatalf("changed entries not decoded again: %+v", second)
	}
	a, b := first.Deployments["web"].AvailableSince, second.Deployments["web"].AvailableSince
	a["probe"] = time.Time{}
	if _, shared := b["probe"]; !shared {
		t.Fatal("an unchanged entry was decoded again")
	}
	delete(entries, "deployment/web")
	third, err := d.Decode(entries)
	if fresh, _ := decide.DecodeMemory(entries); err != nil || !third.Equal(fresh) {
		t.Fatalf("after an entry was dropped decoded %+v, want %+v (%v)", third, fresh, err)
	}
	if _, err := d.Decode(map[string]string{"desired/c/g": "many"}); err == nil {
		t.Fatal("a bad entry decoded")
	}
	after, err := d.Decode(entries)
	if fresh, _ := decide.DecodeMemory(entries); err != nil || !after.Equal(fresh) {
		t.Fatalf("after a bad entry decoded %+v, want %+v (%v)", after, fresh, err)
	}
}

// TestPassSharesTheMemoryItDidNotWrite: a pass hands back the
// deployments, revisions and idle times it was handed, not copies, when
// it changed none of them (Diff then skips them without a walk), and
// copies a section before it writes one (the harness fails a pass that
// changed the memory it was handed).
func TestPassSharesTheMemoryItDidNotWrite(t *testing.T) {
	h := decidetest.New(t)
	h.Cluster("c", decidetest.Group("g", "large", 0, 10))
	h.Service("web", "c", 3, "100m", "64Mi")
	h.Service("db", "c", 2, "100m", "64Mi")
	h.Settle(20)
	sameMap := func(a, b any) bool { return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer() }
	in := h.Memory
	plan := h.Pass()
	if !sameMap(plan.Memory.Deployments, in.Deployments) || !sameMap(plan.Memory.Revisions, in.Revisions) || !sameMap(plan.Memory.IdleSince, in.IdleSince) {
		t.Fatal("a steady pass copied memory sections it did not write")
	}
	if put, del, err := decide.Diff(in, plan.Memory); err != nil || len(put)+len(del) > 0 {
		t.Fatalf("a steady pass changed its memory: put %v, del %v (%v)", put, del, err)
	}
	edit := func(change func(*api.ServiceSpec)) {
		web := *h.Snap.Services[slices.IndexFunc(h.Snap.Services, func(s *api.Service) bool { return s.Metadata.Name == "web" })]
		change(&web.Spec)
		web.Metadata.Generation++
		swapService(h, &web)
		in = h.Memory
		plan = h.Pass()
	}
	four := 4
	edit(func(s *api.ServiceSpec) { s.Replicas = &four }) // the same revision
	if len(plan.CreateReplicas) != 1 || !sameMap(plan.Memory.Revisions, in.Revisions) {
		put, _, _ := decide.Diff(in, plan.Memory)
		t.Fatalf("scaling web made %d replicas and copied its revisions: %v", len(plan.CreateReplicas), put)
	}
	edit(func(s *api.ServiceSpec) { s.Env = map[string]string{"V": "2"} }) // a new revision
	if sameMap(plan.Memory.Revisions, in.Revisions) || sameMap(plan.Memory.Deployments, in.Deployments) {
		t.Fatal("a pass wrote web's new revision into the memory it was handed")
	}
	put, _, err := decide.Diff(in, plan.Memory)
	if err != nil || len(put) == 0 {
		t.Fatalf("web's new revision was not written: %v (%v)", put, err)
	}
	for key := range put {
		if !strings.Contains(key, "web") {
			t.Errorf("the pass wrote %s, not the changed service's", key)
		}
	}
}
