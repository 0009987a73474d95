package names

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/endpoints"
)

// The hub computes a cluster's names once however many agents ask first,
// answers a poll at once when the agent's version is old, wakes waiting
// polls only when a refresh changes the version, and forgets a cluster no
// one asked about for Forget.
func TestNamesHubComputesOnceAndWakesOnChange(t *testing.T) {
	var computed atomic.Int64
	var version atomic.Value
	version.Store("v1")
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var clockMu sync.Mutex
	clock := func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return now }
	// The first computation waits until every first asker has started.
	release := make(chan struct{})
	h := NewHub(Config{Wait: time.Minute, Forget: time.Minute}, clock, func(ctx context.Context, cluster string) (api.ClusterNames, error) {
		computed.Add(1)
		<-release
		return api.ClusterNames{Cluster: cluster, Version: version.Load().(string)}, nil
	})
	ctx := context.Background()
	var wg, started sync.WaitGroup
	for range 50 {
		wg.Add(1)
		started.Add(1)
		go func() {
			defer wg.Done()
			started.Done()
			if got, err := h.Wait(ctx, "dev", ""); err != nil || got.Version != "v1" {
				t.Errorf("first ask: %+v %v", got, err)
			}
		}()
	}
	started.Wait()
	close(release)
	wg.Wait()
	if n := computed.Load(); n != 1 {
		t.Fatalf("50 first asks computed the names %d times, want once", n)
	}
	h.mu.Lock()
	changed := h.clusters["dev"].changed
	h.mu.Unlock()
	if err := h.Refresh(ctx, nil); err != nil { // same version: nobody wakes
		t.Fatal(err)
	}
	select {
	case <-changed:
		t.Fatal("a refresh that changed nothing woke the polls")
	default:
	}
	woken := make(chan string, 1)
	go func() {
		got, _ := h.Wait(ctx, "dev", "v1")
		woken <- got.Version
	}()
	version.Store("v2")
	if err := h.Refresh(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if v := <-woken; v != "v2" {
		t.Fatalf("woken with %s, want v2", v)
	}
	clockMu.Lock()
	now = now.Add(2 * time.Minute)
	clockMu.Unlock()
	before := computed.Load()
	if err := h.Refresh(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if h.entry("dev") != nil || computed.Load() != before {
		t.Fatal("a cluster no one asked about for Forget is still computed")
	}
}

// A poll from a kept version asking for a delta gets the difference,
// which applied to its names gives the new ones; a poll from a version
// no longer kept (or not asking) gets them whole.
func TestNamesHubAnswersKeptVersionsWithTheDifference(t *testing.T) {
	targets := []api.Endpoint{{Replica: "web-0", Address: "10.0.0.1", Weight: 100, Serving: true}, {Replica: "web-1", Address: "10.0.0.2", Weight: 100, Serving: true}}
	var current atomic.Value
	names := func(n int) api.ClusterNames {
		set := api.ServiceEndpoints{Service: "web", Cluster: "dev", Name: api.ServiceName("web", "dev"), Endpoints: targets[:n]}
		return endpoints.Names("dev", []api.ServiceEndpoints{set}, nil, nil, nil)
	}
	current.Store(names(2))
	h := NewHub(Config{Wait: time.Minute, Forget: time.Hour, History: 1}, time.Now, func(context.Context, string) (api.ClusterNames, error) {
		return current.Load().(api.ClusterNames), nil
	})
	ctx := context.Background()
	v1, err := h.Wait(ctx, "dev", "")
	if err != nil {
		t.Fatal(err)
	}
	current.Store(names(1))
	if err := h.Refresh(ctx, nil); err != nil {
		t.Fatal(err)
	}
	_, data, err := h.WaitEncoded(ctx, "dev", v1.Version, true)
	if err != nil {
		t.Fatal(err)
	}
	var delta api.ClusterNames
	if err := json.Unmarshal(data, &delta); err != nil {
		t.Fatal(err)
	}
	if delta.Base != v1.Version || len(delta.Records) != 1 || !slices.Equal(delta.Records[0].Removed, []string{"web-1"}) {
		t.Fatalf("delta from v1: %s", data)
	}
	applied, err := endpoints.Apply(v1, delta)
	if err != nil || applied.Version != names(1).Version {
		t.Fatalf("applied: %+v %v", applied, err)
	}
	current.Store(names(0))
	if err := h.Refresh(ctx, nil); err != nil {
		t.Fatal(err)
	}
	for _, asked := range []struct {
		version string
		delta   bool
	}{{v1.Version, true}, {applied.Version, false}} {
		_, data, _ := h.WaitEncoded(ctx, "dev", asked.version, asked.delta)
		var whole api.ClusterNames
		if err := json.Unmarshal(data, &whole); err != nil || whole.Base != "" || whole.Version != names(0).Version {
			t.Fatalf("poll from %s (delta %v): %s, want the names whole", asked.version, asked.delta, data)
		}
	}
}
