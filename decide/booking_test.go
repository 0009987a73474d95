package decide_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/decide"
	"github.com/gantry-dev/gantry/decide/decidetest"
	"github.com/gantry-dev/gantry/provisioner"
)

// The harness decides every pass from the last pass's booking and
// afresh, and fails when they differ. These change, between two passes,
// one thing the booking remembers of a machine that nothing else on it
// changes with; a booking that kept it would leave the replica pending.

// settle runs passes until one changes nothing the next would see, so
// that the change a test makes next is the only one.
func settle(h *decidetest.Harness) {
	h.T.Helper()
	for range 3 {
		h.Pass()
	}
}

func assignedTo(plan decide.Plan, replicaID, machine string) bool {
	for _, a := range plan.Assignments {
		if a.Replica == replicaID && a.Placement.Machine == machine {
			return true
		}
	}
	return false
}

// A machine's labels change (a new object, as a server's view hands
// out): a replica that selects them is placed there.
func TestBookingSeesAMachinesNewLabels(t *testing.T) {
	h := decidetest.New(t)
	h.Cluster("c", decidetest.Group("g", "small", 1, 1))
	m := h.Machine("c", "g", "small")
	h.Service("db", "c", 1, "100m", "64Mi", func(s *api.ServiceSpec) { s.Placement.NodeSelector = map[string]string{"disk": "ssd"} })
	if plan := h.Pass(); len(plan.Assignments) != 0 {
		t.Fatalf("placed on a machine without the label: %+v", plan.Assignments)
	}
	settle(h)
	m.Labels = map[string]string{"disk": "ssd"}
	if plan := h.Pass(); !assignedTo(plan, "db-0", m.ID) {
		t.Fatalf("db-0 not placed on the machine that now has its label: %s", decidetest.Describe(plan))
	}
}

// A resident's service is relabelled: a replica that kept away from the
// old label may now share its machine.
func TestBookingSeesAResidentsNewLabels(t *testing.T) {
	h := decidetest.New(t)
	h.Cluster("c", decidetest.Group("g", "small", 1, 1))
	m := h.Machine("c", "g", "small")
	db := h.Service("db", "c", 1, "100m", "64Mi")
	db.Metadata.Labels = map[string]string{"tier": "db"}
	h.Replica("db", 0, m.ID)
	h.Service("web", "c", 1, "100m", "64Mi", func(s *api.ServiceSpec) {
		s.Placement.AntiAffinity = []api.AffinityTerm{{Selector: map[string]string{"tier": "db"}, Topology: "machine"}}
	})
	if plan := h.Pass(); assignedTo(plan, "web-0", m.ID) {
		t.Fatalf("web-0 placed beside a tier=db replica: %s", decidetest.Describe(plan))
	}
	settle(h)
	db.Metadata.Labels = map[string]string{"tier": "cache"}
	if plan := h.Pass(); !assignedTo(plan, "web-0", m.ID) {
		t.Fatalf("web-0 not placed once its neighbour is no longer tier=db: %s", decidetest.Describe(plan))
	}
}

// A resident's requests shrink (a new object): a replica that did not fit
// beside it now does.
func TestBookingSeesAResidentsNewRequests(t *testing.T) {
	h := decidetest.New(t)
	h.Cluster("c", decidetest.Group("g", "small", 1, 1))
	m := h.Machine("c", "g", "small")
	h.Service("big", "c", 1, "800m", "64Mi")
	big := h.Replica("big", 0, m.ID)
	h.Service("web", "c", 1, "500m", "64Mi")
	if plan := h.Pass(); assignedTo(plan, "web-0", m.ID) {
		t.Fatalf("web-0 placed where it does not fit: %s", decidetest.Describe(plan))
	}
	settle(h)
	smaller := *h.ReplicaByID(big.ID)
	smaller.Requests.MilliCPU = 200
	for i, r := range h.Snap.Replicas {
		if r.ID == big.ID {
			h.Snap.Replicas[i] = &smaller
		}
	}
	if plan := h.Pass(); !assignedTo(plan, "web-0", m.ID) {
		t.Fatalf("web-0 not placed once its neighbour asks less: %s", decidetest.Describe(plan))
	}
}

// A pass whose plan was not carried out (its act failed) is decided
// again from the same snapshot: the placements the first one booked on
// its copies of the machines left the booking as it was, so the second
// places the same.
func TestBookingOutlivesAPlanNotCarriedOut(t *testing.T) {
	h := decidetest.New(t)
	h.Cluster("c", decidetest.Group("g", "small", 2, 2))
	h.Machine("c", "g", "small")
	h.Machine("c", "g", "small")
	h.Service("web", "c", 1, "100m", "64Mi", spreadOverMachines)
	first := h.Decide()
	again := h.Decide()
	if len(first.Assignments) != 1 || len(again.Assignments) != 1 || first.Assignments[0].Placement.Machine != again.Assignments[0].Placement.Machine {
		t.Fatalf("decided again, the replica went elsewhere: first %+v, again %+v", first.Assignments, again.Assignments)
	}
}

// The booking is checked against a booking made afresh, not only the
// plan: these change what a resident's rules are built from where no
// decision of the pass reads it yet.

// A cluster's zones change: its residents' rules name the new ones.
func TestBookingSeesAClustersNewZones(t *testing.T) {
	h := decidetest.New(t)
	c := h.Cluster("c", decidetest.Group("g", "small", 1, 1))
	c.Spec.CapacityGroups[0].Zones = []string{"a"}
	m := h.Machine("c", "g", "small")
	h.Service("db", "c", 1, "100m", "64Mi")
	h.Replica("db", 0, m.ID)
	settle(h)
	c.Spec.CapacityGroups[0].Zones = []string{"a", "b"}
	h.Pass()
}

// A machine on its way learns its zone from the provider's list: the pass
// books its own copy with the zone though the feed has not listed the
// machine; and when that plan is not carried out, the next pass books
// the store's machine again, without the zone, though nothing changed in
// the store since.
func TestBookingSeesAMachineThePassChanged(t *testing.T) {
	h := decidetest.New(t)
	h.Cluster("c", decidetest.Group("g", "small", 1, 1))
	intent := h.Machine("c", "g", "small", func(m *api.Machine) {
		m.ProviderID, m.JoinedAt, m.LastHeartbeat, m.CreatedAt, m.Runtimes, m.Zone = "", nil, nil, h.Now, nil, ""
		m.JoinState = api.JoinProvisioning
	})
	h.Decide()
	h.Step(time.Minute)
	h.Snap.Inventories[decidetest.Provider] = decide.Inventory{At: h.Now, Instances: []provisioner.Instance{
		{ID: "i-found", Zone: "z-listed", Tags: map[string]string{provisioner.TagMachine: intent.ID}, LaunchedAt: h.Now},
	}}
	if plan := h.Decide(); len(plan.Adoptions) != 1 {
		t.Fatalf("the machine was not adopted: %s", decidetest.Describe(plan))
	}
	h.Decide() // the adoption was not carried out
}

// A cluster keeps more back on every machine: its machines' allocatable
// room shrinks though no machine changed.
func TestBookingSeesAClustersNewReservation(t *testing.T) {
	h := decidetest.New(t)
	c := h.Cluster("c", decidetest.Group("g", "small", 1, 1))
	h.Machine("c", "g", "small")
	settle(h)
	c.Spec.SystemReserved = api.ResourceAmounts{CPU: "200m"}
	h.Pass()
}

// A machine not joined yet runs what its provider offers: when the
// provider's runtimes change, its booking does.
func TestBookingSeesAProvidersNewRuntimes(t *testing.T) {
	h := decidetest.New(t)
	h.Cluster("c", decidetest.Group("g", "small", 1, 1))
	h.Machine("c", "g", "small", func(m *api.Machine) {
		m.JoinedAt, m.LastHeartbeat, m.CreatedAt, m.Runtimes = nil, nil, h.Now, nil
		m.JoinState = api.JoinBooting
	})
	settle(h)
	info := h.Snap.Providers[decidetest.Provider]
	info.Runtimes = append(slices.Clone(info.Runtimes), "sandbox")
	h.Snap.Providers[decidetest.Provider] = info
	h.Pass()
}

// A revision's spec in the memory changes (a test's edit; revisions are
// named by their spec's hash): the replicas of that revision are booked
// with its rules.
func TestBookingSeesARevisionsNewSpec(t *testing.T) {
	h := decidetest.New(t)
	h.Cluster("c", decidetest.Group("g", "small", 1, 1))
	m := h.Machine("c", "g", "small")
	h.Service("db", "c", 1, "100m", "64Mi")
	db := h.Replica("db", 0, m.ID)
	settle(h)
	key := decide.RevisionKey("db", db.SpecHash)
	rev, ok := h.Memory.Revisions[key]
	if !ok {
		t.Fatalf("no revision %s in the memory: %v", key, h.Memory.Revisions)
	}
	rev.Spec.Placement.Priority = 7
	h.Memory.Revisions[key] = rev
	h.Pass()
}

// What changed is noted as the view logs it: a replica's first machine
// counts (where the last booking has it); the services touched are those
// of the replicas and of the memory's deployments, promotions and
// revisions.
func TestChangesNoteTheFirstMachine(t *testing.T) {
	c := decide.NewChanges()
	c.Replica("web-0", "web", "m1")
	c.Replica("web-0", "web", "m2")
	if c.Replicas["web-0"].Machine != "m1" {
		t.Fatalf("noted %+v", c)
	}
}

// A pass lays the booking's machines side by side once more than
// LayOutShare of them were booked afresh since they last were (or all
// were, by one pass), not before, and decides the same (the harness
// decides each pass afresh too and compares).
func TestBookingLaysOutItsMachinesOnceEnoughWereBookedAfresh(t *testing.T) {
	h := decidetest.New(t)
	h.Config.LayOutShare = 0.125 // 16 machines: more than 2 booked afresh
	h.Cluster("c", decidetest.Group("g", "small", 16, 16))
	var fleet []*api.Machine
	for i := range 16 {
		m := h.Machine("c", "g", "small")
		fleet = append(fleet, m)
		h.Service(fmt.Sprintf("s%02d", i), "c", 1, "100m", "64Mi")
		h.Replica(fmt.Sprintf("s%02d", i), 0, m.ID)
	}
	if plan := h.Pass(); plan.Booked.LaidOut() {
		t.Fatalf("the first pass booked every machine afresh, one after the other, and laid them out again")
	}
	settle(h)
	relabel := func(ms ...*api.Machine) decide.Plan {
		for _, m := range ms {
			c := *m
			c.Labels = map[string]string{"relabelled": m.ID}
			h.Snap.Machines[slices.Index(h.Snap.Machines, m)] = &c
		}
		return h.Pass()
	}
	if plan := relabel(fleet[0], fleet[1]); plan.Booked.LaidOut() {
		t.Fatalf("2 of 16 machines booked afresh were laid out again")
	}
	if plan := h.Pass(); plan.Booked.LaidOut() {
		t.Fatalf("a pass that booked nothing afresh laid the machines out")
	}
	if plan := relabel(h.Snap.Machines[5]); !plan.Booked.LaidOut() {
		t.Fatalf("3 of 16 machines booked afresh since the last layout were not laid out")
	}
	h.Config.LayOutShare = 1
	if plan := relabel(h.Snap.Machines[2:]...); plan.Booked.LaidOut() {
		t.Fatalf("laid out with LayOutShare 1")
	}
}
