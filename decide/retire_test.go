package decide_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/decide/decidetest"
	"github.com/gantry-dev/gantry/endpoints"
)

func scaleTo(h *decidetest.Harness, n int) {
	change(h, func(s *api.ServiceSpec) { s.Replicas = &n })
}

// A serving replica that a scale-down removes leaves its service's name
// first and keeps running for drainSeconds, then is deleted; its id is
// not reused meanwhile.
func TestRemovedReplicaDrainsBeforeItStops(t *testing.T) {
	h := serving(t, 2)
	scaleTo(h, 1)
	plan := h.Pass()
	if len(plan.RetireReplicas) != 1 || plan.RetireReplicas[0].ID != "web-1" || len(plan.DeleteReplicas) != 0 {
		t.Fatalf("scale down: retired %+v, deleted %+v; want web-1 retired, nothing deleted", plan.RetireReplicas, plan.DeleteReplicas)
	}
	r := h.ReplicaByID("web-1")
	if r == nil || r.RetiringSince == nil || r.Machine == "" {
		t.Fatalf("web-1 after the pass: %+v, want it placed and retiring", r)
	}
	set := endpoints.Of(h.Snap.Services[0], h.Snap.Replicas, map[string]*api.Machine{r.Machine: h.MachineByID(r.Machine)})
	for _, e := range set.Endpoints {
		if e.Replica == "web-1" && (e.Serving || !strings.HasPrefix(e.Reason, "retiring")) {
			t.Fatalf("web-1 in the endpoints: %+v, want out of the name, retiring", e)
		}
	}
	scaleTo(h, 2) // a new replica meanwhile takes another id
	h.Step(2 * time.Second)
	plan = h.Pass()
	if len(plan.DeleteReplicas) != 0 || len(plan.CreateReplicas) != 1 || plan.CreateReplicas[0].ID == "web-1" {
		t.Fatalf("2 s into the drain: deleted %+v, created %+v; want nothing deleted and a new replica with a fresh id", plan.DeleteReplicas, plan.CreateReplicas)
	}
	h.Step(time.Second)
	plan = h.Pass()
	if len(plan.DeleteReplicas) != 1 || plan.DeleteReplicas[0].ID != "web-1" || !strings.Contains(plan.DeleteReplicas[0].Reason, "drained for 3s") {
		t.Fatalf("3 s into the drain: deleted %+v, want web-1, drained", plan.DeleteReplicas)
	}
}

// A replica that takes no traffic (crashed), or of a service that drains
// for 0 s, is deleted at once.
func TestReplicaThatServesNothingIsDeletedAtOnce(t *testing.T) {
	h := serving(t, 2)
	h.ReplicaByID("web-1").State = api.ReplicaCrashed
	scaleTo(h, 1)
	if plan := h.Pass(); len(plan.DeleteReplicas) != 1 || len(plan.RetireReplicas) != 0 {
		t.Fatalf("a crashed replica scaled away: deleted %+v, retired %+v", plan.DeleteReplicas, plan.RetireReplicas)
	}
	h = serving(t, 2, func(s *api.ServiceSpec) { zero := 0; s.Update.DrainSeconds = &zero })
	scaleTo(h, 1)
	if plan := h.Pass(); len(plan.DeleteReplicas) != 1 || len(plan.RetireReplicas) != 0 {
		t.Fatalf("drainSeconds 0: deleted %+v, retired %+v", plan.DeleteReplicas, plan.RetireReplicas)
	}
}

// A deleted service's replicas go, and only theirs: among three
// services, the middle one deleted, with the view naming it orphaned or
// not (the harness decides both ways).
func TestReplicasOfADeletedServiceAreDeleted(t *testing.T) {
	h := decidetest.New(t)
	h.Cluster("c", decidetest.Group("g", "small", 1, 1))
	m := h.Machine("c", "g", "small")
	for _, name := range []string{"api", "db", "web"} {
		h.Service(name, "c", 2, "10m", "16Mi")
		h.Replica(name, 0, m.ID)
		h.Replica(name, 1, m.ID)
	}
	settle(h)
	h.Snap.Services = slices.DeleteFunc(h.Snap.Services, func(s *api.Service) bool { return s.Metadata.Name == "db" })
	plan := h.Pass()
	var gone []string
	for _, d := range append(plan.DeleteReplicas, plan.RetireReplicas...) {
		gone = append(gone, d.ID)
	}
	slices.Sort(gone)
	if !slices.Equal(gone, []string{"db-0", "db-1"}) {
		t.Fatalf("deleted %v, want db's two replicas: %s", gone, decidetest.Describe(plan))
	}
}
