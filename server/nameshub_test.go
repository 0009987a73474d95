package server

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
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
	h := newNamesHub(NamesConfig{Wait: time.Minute, Forget: time.Minute}, clock, func(ctx context.Context, cluster string) (api.ClusterNames, error) {
		computed.Add(1)
		time.Sleep(10 * time.Millisecond) // long enough for the first askers to meet
		return api.ClusterNames{Cluster: cluster, Version: version.Load().(string)}, nil
	})
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if got, err := h.wait(ctx, "dev", ""); err != nil || got.Version != "v1" {
				t.Errorf("first ask: %+v %v", got, err)
			}
		}()
	}
	wg.Wait()
	if n := computed.Load(); n != 1 {
		t.Fatalf("50 first asks computed the names %d times, want once", n)
	}
	woken := make(chan string, 1)
	go func() {
		got, _ := h.wait(ctx, "dev", "v1")
		woken <- got.Version
	}()
	time.Sleep(20 * time.Millisecond)
	if err := h.refresh(ctx); err != nil { // same version: nobody wakes
		t.Fatal(err)
	}
	select {
	case v := <-woken:
		t.Fatalf("a refresh that changed nothing woke a poll (version %s)", v)
	case <-time.After(50 * time.Millisecond):
	}
	version.Store("v2")
	if err := h.refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if v := <-woken; v != "v2" {
		t.Fatalf("woken with %s, want v2", v)
	}
	clockMu.Lock()
	now = now.Add(2 * time.Minute)
	clockMu.Unlock()
	before := computed.Load()
	if err := h.refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if h.entry("dev") != nil || computed.Load() != before {
		t.Fatal("a cluster no one asked about for Forget is still computed")
	}
}
