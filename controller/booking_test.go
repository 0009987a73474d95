package controller

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/decide"
	"github.com/gantry-dev/gantry/decide/decidetest"
	"github.com/gantry-dev/gantry/store"
)

// The leader's passes book the machines from the last pass's booking and
// what its view logged since. Between passes of seeded random writes
// (services scaled, relabelled, given a new spec, deleted and made again;
// the cluster's zones and size changed; replicas deleted), every pass's
// booking from the log is the booking made afresh, and decides the same.
func TestPassBooksFromTheViewsLogWhatAFreshPassWould(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 31))
			e := newEnv(t)
			e.cfg.Decide.RebookShare = 1 // from the booking however much changed
			e.restart()
			e.apply(clusterOfZones(2, "zone-a"))
			e.settle()
			checked := 0
			for step := 0; step < 30; step++ {
				write := randomWrite(e, rng)
				e.join()
				e.beat()
				checked += e.checkBooking(write)
				e.pass()
				e.clock.Step(time.Duration(1+rng.IntN(20)) * time.Second)
			}
			if checked < 20 {
				t.Fatalf("only %d of 30 passes were booked from the log", checked)
			}
		})
	}
}

func clusterOfZones(minSize int, zones string) string {
	return fmt.Sprintf(`kind: Cluster
metadata: {name: c}
spec:
  provider: {name: fake}
  agent: {version: v1, apiUrl: "https://gantry.example.com"}
  capacityGroups: [{groupId: g, instanceType: fake.small, minSize: %d, maxSize: 6, zones: [%s]}]
`, minSize, zones)
}

func serviceOf(name string, replicas int, tier, cpu string) string {
	return fmt.Sprintf(`kind: Service
metadata: {name: %s, labels: {tier: %s}}
spec:
  cluster: c
  command: ["sleep", "1000"]
  replicas: %d
  resources: {cpu: %s, memory: 64Mi}
`, name, tier, replicas, cpu)
}

// randomWrite writes one random change, as a user or an agent would, and
// says which.
func randomWrite(e *env, rng *rand.Rand) string {
	name := fmt.Sprint("svc", rng.IntN(4))
	switch rng.IntN(6) {
	case 0:
		e.apply(clusterOfZones(1+rng.IntN(3), []string{"zone-a", "zone-a, zone-b"}[rng.IntN(2)]))
		return "cluster"
	case 1:
		e.update(func(tx store.Tx) error { return ignoreNotFound(tx.DeleteService(name)) })
		return "delete " + name
	case 2:
		var id string
		e.view(func(tx store.Tx) error {
			rs, err := tx.ListReplicas(store.ReplicaFilter{})
			if len(rs) > 0 {
				id = rs[rng.IntN(len(rs))].ID
			}
			return err
		})
		if id != "" {
			e.update(func(tx store.Tx) error { return ignoreNotFound(tx.DeleteReplica(id)) })
		}
		return "delete replica " + id
	default:
		e.apply(serviceOf(name, rng.IntN(5), []string{"web", "db"}[rng.IntN(2)], []string{"100m", "200m"}[rng.IntN(2)]))
		return "apply " + name
	}
}

func ignoreNotFound(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}

// checkBooking decides the next pass from the controller's booking and
// what the view logged since, and afresh, and fails unless both book and
// decide the same. It reports whether the booking was used.
func (e *env) checkBooking(write string) int {
	e.t.Helper()
	c := e.ctrl
	snap, mem, revision, err := c.loadFor(context.Background(), false)
	if err != nil {
		e.t.Fatal(err)
	}
	if c.booked == nil {
		return 0
	}
	snap.Booked, snap.Changed = c.booked, c.changedSince(c.bookedAt, revision)
	if snap.Changed == nil {
		e.t.Fatalf("after %s the view no longer knew what changed since revision %d", write, c.bookedAt)
	}
	kept := decide.Decide(c.cfg.Decide, snap, mem, e.clock.Now())
	// A pass consumes the booking it is handed: the loop's next pass books
	// afresh.
	snap.Booked, c.booked = nil, nil
	fresh := decide.Decide(c.cfg.Decide, snap, mem, e.clock.Now())
	if diff := kept.Booked.Differs(fresh.Booked); diff != "" {
		e.t.Fatalf("after %s the booking from the log differs from one made afresh: %s", write, diff)
	}
	kept.Booked, fresh.Booked = nil, nil
	if !reflect.DeepEqual(kept, fresh) {
		e.t.Fatalf("after %s a pass from the booking decided otherwise:\n%s\nafresh:\n%s", write, decidetest.Describe(kept), decidetest.Describe(fresh))
	}
	return 1
}
