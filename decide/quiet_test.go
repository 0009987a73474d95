package decide_test

import (
	"testing"

	"github.com/gantry-dev/gantry/decide/decidetest"
)

// A service whose steps decided nothing is skipped by the next pass
// while nothing they read changed. The harness decides every pass with
// the skips and without, and fails if the plans differ; each test here
// changes one thing a skip must see, after the service went quiet.

// An operator deletes a replica: the service makes it again.
func TestQuietServiceSeesAReplicaDeleted(t *testing.T) {
	h := decidetest.New(t)
	h.Cluster("c", decidetest.Group("g", "small", 1, 1))
	m := h.Machine("c", "g", "small")
	h.Service("web", "c", 2, "100m", "64Mi")
	h.Replica("web", 0, m.ID)
	h.Replica("web", 1, m.ID)
	settle(h)
	h.Snap.Replicas = h.Snap.Replicas[:1]
	if plan := h.Pass(); len(plan.CreateReplicas) != 1 {
		t.Fatalf("a deleted replica was not made again: %s", decidetest.Describe(plan))
	}
}
