package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gantry-dev/gantry/client"
	"github.com/gantry-dev/gantry/store/postgres/pgtest"
)

// burstServices is how many changes the burst makes: one new service of
// one replica each.
const burstServices = 1000

const burstCluster = `kind: Cluster
metadata: {name: burst}
spec:
  provider: {name: external}
  capacityGroups:
    - {groupId: general, instanceType: external, minSize: 0, maxSize: 10}
`

// Three servers on PostgreSQL; 1,000 changes (a service of one replica
// each, applied eight at a time through any server) and the leader
// killed (SIGKILL) at a random point of the burst: every change is
// carried out exactly once, whoever leads: every service has its one
// replica, none made twice (one Created event each) or removed. The
// cluster provisions nothing (its machines would join by hand), so the
// replicas stay pending: what is checked is the control loop's own work.
func TestHALeaderKilledDuringABurstOfChanges(t *testing.T) {
	rng := seeded(t)
	h := newHA(t, 3, pgtest.URL(t))
	first := h.leader()
	h.apply(burstCluster)
	killAt := 200 + rng.IntN(600)
	var applied, atKill atomic.Int64
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		for applied.Load() < int64(killAt) {
			waitPasses(t, first.dataDir, first.url, 1)
		}
		h.kill(first)
		atKill.Store(applied.Load())
	}()
	next := make(chan int)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range next {
				h.apply(fmt.Sprintf("kind: Service\nmetadata: {name: b%04d}\nspec:\n  cluster: burst\n  command: [sleep, \"1000\"]\n  replicas: 1\n  resources: {cpu: 10m, memory: 16Mi}\n", i))
				applied.Add(1)
			}
		})
	}
	for i := range burstServices {
		next <- i
	}
	close(next)
	wg.Wait()
	<-killed
	t.Logf("the leader %s was killed after %d of %d changes", first.name, atKill.Load(), burstServices)
	if atKill.Load() >= burstServices {
		t.Fatalf("the leader was killed after the burst (at %d changes), not during it", atKill.Load())
	}
	h.leader(first)
	api := h.api()
	waitFor(t, fmt.Sprintf("%d services with their one replica each", burstServices), func() (bool, string) {
		replicas, err := api.ListReplicasInChunks(context.Background(), client.ReplicaQuery{}, 500)
		if err != nil {
			return false, err.Error()
		}
		perService := map[string]int{}
		for _, r := range replicas {
			perService[r.Service]++
			if r.Index != 0 {
				return false, fmt.Sprintf("replica %s has index %d", r.ID, r.Index)
			}
		}
		for s, n := range perService {
			if n != 1 {
				return false, fmt.Sprintf("service %s has %d replicas", s, n)
			}
		}
		return len(perService) == burstServices, fmt.Sprintf("%d services with replicas", len(perService))
	})
	// The replica events the store kept (it keeps the newest 10,000
	// events of all kinds; a slow run can push out the burst's first
	// Created events): no burst replica was made twice, and none was
	// removed, which making one again would have needed (ids are unique).
	events, err := api.ListEvents(context.Background(), client.EventQuery{Kind: "Replica", Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	created, reasons := map[string]int{}, map[string]int{}
	for _, e := range events {
		if !strings.HasPrefix(e.ObjectName, "b") {
			continue
		}
		reasons[e.Reason]++
		switch e.Reason {
		case "Created":
			created[e.ObjectName]++
		case "Removed", "Retiring":
			t.Errorf("replica %s: %s (%s)", e.ObjectName, e.Reason, e.Message)
		}
	}
	t.Logf("%d replica events kept, by reason: %v", len(events), reasons)
	for name, n := range created {
		if n != 1 {
			t.Errorf("replica %s was created %d times", name, n)
		}
	}
	if len(created) < burstServices/2 {
		t.Fatalf("only %d replicas have a Created event kept: too few to tell", len(created))
	}
}
