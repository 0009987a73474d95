package decide_test

import (
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/decide"
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
