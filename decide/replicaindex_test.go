package decide

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/replica"
)

// The index finds every replica, and only those, by id and by service and
// id, through appends and drops, whether the snapshot came in the store's
// order (binary search) or not (map); services whose names are prefixes
// of each other's ids included.
func TestReplicaIndexFindsWhatAMapWould(t *testing.T) {
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 7))
		services := []string{"a", "a-1", "a-1-r2", "web", "web-0-r1", "x-y-z"}
		var replicas []*api.Replica
		taken := map[string]bool{}
		for range 60 {
			svc := services[rng.IntN(len(services))]
			id := replica.ID(svc, rng.IntN(8))
			if rng.IntN(3) == 0 {
				id = fmt.Sprintf("%s-r%d", id, rng.IntN(3))
			}
			if !taken[id] {
				taken[id] = true
				replicas = append(replicas, &api.Replica{ID: id, Service: svc})
			}
		}
		if seed%2 == 0 {
			slices.SortFunc(replicas, byServiceAndID)
		}
		x := newReplicaIndex(replicas)
		if seed%2 == 0 && x.sorted != len(replicas) {
			t.Fatalf("seed %d: a snapshot in the store's order was not searched", seed)
		}
		check := func(stage string) {
			t.Helper()
			for i, r := range replicas {
				if at, ok := x.find(replicas, r.ID); !ok || at != i {
					t.Fatalf("seed %d, %s: find(%s) = %d, %v; want %d", seed, stage, r.ID, at, ok, i)
				}
				if at, ok := x.findOf(replicas, r.Service, r.ID); !ok || at != i {
					t.Fatalf("seed %d, %s: findOf(%s, %s) = %d, %v; want %d", seed, stage, r.Service, r.ID, at, ok, i)
				}
			}
			for _, absent := range []string{"a-9", "a-1-9", "web-0-r1-9", "nope", "a-", "-"} {
				if slices.ContainsFunc(replicas, func(r *api.Replica) bool { return r.ID == absent }) {
					continue
				}
				if at, ok := x.find(replicas, absent); ok {
					t.Fatalf("seed %d, %s: found absent %s at %d", seed, stage, absent, at)
				}
			}
		}
		check("as listed")
		for i := range 5 {
			r := &api.Replica{ID: fmt.Sprintf("web-%d-r9", 10+i), Service: "web"}
			x.add(r.ID, len(replicas))
			replicas = append(replicas, r)
		}
		check("with replicas made")
		drop := map[string]bool{}
		for _, r := range replicas {
			if rng.IntN(4) == 0 {
				drop[r.ID] = true
			}
		}
		var at []int
		for i, r := range replicas {
			if drop[r.ID] {
				at = append(at, i)
			}
		}
		replicas = x.without(replicas, at)
		check("after drops")
		for id := range drop {
			if _, ok := x.find(replicas, id); ok {
				t.Fatalf("seed %d: dropped %s still found", seed, id)
			}
		}
	}
}

// A replica whose id does not begin with its service's name cannot be
// found by searching its id's prefixes: such a snapshot is indexed by map.
func TestReplicaIndexMapsIDsOutsideTheirService(t *testing.T) {
	replicas := []*api.Replica{{ID: "a-0", Service: "a"}, {ID: "other", Service: "b"}}
	x := newReplicaIndex(replicas)
	if x.sorted != 0 {
		t.Fatalf("searched a snapshot whose ids do not begin with their service")
	}
	if at, ok := x.find(replicas, "other"); !ok || at != 1 {
		t.Fatalf("find(other) = %d, %v", at, ok)
	}
}
