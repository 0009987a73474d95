package decide

import (
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
)

// The census of the machines as a pass found them answers for those it
// did not change; a machine it changed is looked at itself: one the pass
// holds in a group the spec lacks is drained although the census counted
// none there.
func TestOrphanedGroupsLookAtThePasssOwnMachines(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	cl := testCluster("c", "", "g")
	fleet := []*api.Machine{
		{ID: "c-g-1", Cluster: "c", Group: "g", FleetState: api.FleetActive, JoinState: api.JoinJoined},
		{ID: "c-g-2", Cluster: "c", Group: "g", FleetState: api.FleetActive, JoinState: api.JoinJoined},
	}
	snap := &Snapshot{Machines: fleet, MachinesByID: true, InStoreOrder: true, Clusters: map[string]*api.Cluster{"c": cl}}
	p := newPass(DefaultConfig(), snap, Memory{}, now)
	p.drainOrphanedGroups()
	if len(p.plan.Drains) != 0 {
		t.Fatalf("drained machines of a group the spec has: %+v", p.plan.Drains)
	}
	p.ownMachine(p.machines[1]).Group = "gone" // as no step does: the census counted it in g
	p.drainOrphanedGroups()
	if len(p.plan.Drains) != 1 || p.plan.Drains[0].Machine != "c-g-2" {
		t.Fatalf("drains %+v, want c-g-2's", p.plan.Drains)
	}
}

// testCluster is a cluster of those groups on that provider.
func testCluster(name, provider string, groups ...string) *api.Cluster {
	cl := &api.Cluster{}
	cl.Metadata.Name = name
	cl.Spec.Provider.Name = provider
	for _, g := range groups {
		cl.Spec.CapacityGroups = append(cl.Spec.CapacityGroups, api.CapacityGroup{GroupID: g})
	}
	return cl
}
