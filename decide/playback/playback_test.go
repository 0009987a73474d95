package playback

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/decide"
)

func world() *World {
	cl := &api.Cluster{Kind: api.KindCluster, Metadata: api.ObjectMeta{Name: "c", Generation: 1}, Spec: api.ClusterSpec{
		Provider: api.ProviderSpec{Name: "fake"}, CapacityGroups: []api.CapacityGroup{{GroupID: "g", InstanceType: "small", MaxSize: 3}}}}
	return &World{Now: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), Snap: &decide.Snapshot{
		Clusters:  map[string]*api.Cluster{"c": cl},
		Providers: map[string]decide.ProviderInfo{"fake": {Provisions: true, Runtimes: []string{"process"}}},
	}}
}

// A launch becomes a booting machine at once, which then joins and
// heartbeats; a termination takes it out of the live machines. A world
// that indexes its machines finds them as one that looks at each.
func TestALaunchBootsJoinsAndTerminates(t *testing.T) {
	for _, indexed := range []bool{false, true} {
		w := world()
		if indexed {
			w.IndexMachines()
		}
		launchBootJoinTerminate(t, w)
	}
}

func launchBootJoinTerminate(t *testing.T, w *World) {
	capacity := api.Resources{MilliCPU: 1000, MemoryBytes: 1 << 30}
	if err := w.Apply(decide.Plan{Launches: []decide.Launch{{Cluster: "c", Group: "g", InstanceType: "small", Zone: "a", Capacity: capacity}}}); err != nil {
		t.Fatal(err)
	}
	if len(w.Snap.Machines) != 1 || !w.Snap.Machines[0].Launching() || w.Snap.Machines[0].ProviderID == "" {
		t.Fatalf("machines after the launch: %+v", w.Snap.Machines)
	}
	m := w.Snap.Machines[0]
	if w.MachineByID(m.ID) != m {
		t.Fatalf("machine %s not found after its launch", m.ID)
	}
	w.Now = w.Now.Add(time.Minute)
	if err := w.Join(); err != nil {
		t.Fatal(err)
	}
	w.Heartbeat()
	if m.JoinState != api.JoinJoined || m.LastHeartbeat == nil || !m.LastHeartbeat.Equal(w.Now) || m.Capacity != capacity {
		t.Fatalf("after joining: %+v", m)
	}
	if err := w.Apply(decide.Plan{Terminates: []decide.Terminate{{Machine: m.ID, Reason: "test"}}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Apply(decide.Plan{TerminateCalls: []string{m.ID}}); err != nil {
		t.Fatal(err)
	}
	if len(w.Snap.Machines) != 0 || w.MachineByID(m.ID) != nil {
		t.Fatalf("a terminated machine is still live: %+v, found by id: %v", w.Snap.Machines, w.MachineByID(m.ID) != nil)
	}
}

// A plan naming what the snapshot does not hold is an error, not a
// panic: the harness fails its test with it, a simulation stops.
func TestAPlanNamingWhatIsNotThereIsAnError(t *testing.T) {
	for _, tc := range []struct {
		name string
		plan decide.Plan
		want string
	}{
		{"machine", decide.Plan{Drains: []decide.Drain{{Machine: "m-9"}}}, "machine m-9"},
		{"cluster", decide.Plan{Launches: []decide.Launch{{Cluster: "elsewhere", Group: "g"}}}, "cluster elsewhere"},
		{"replica", decide.Plan{Assignments: []decide.Assignment{{Replica: "web-0"}}}, "unknown replica web-0"},
		{"service", decide.Plan{Reverts: []decide.Revert{{Service: "web"}}}, "service web"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := world().Apply(tc.plan)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one naming %s", err, tc.want)
			}
		})
	}
}

// A terminating machine's replicas go back to pending and the one moving
// off it stays where it went, whether the world walks every replica or
// asks OnOrOff; an indexed world deletes replicas as one that is not.
func TestATerminationFindsTheMachinesReplicasEitherWay(t *testing.T) {
	for _, kept := range []bool{false, true} {
		w := world()
		m := &api.Machine{ID: "m1", Cluster: "c", Group: "g", JoinState: api.JoinJoined, FleetState: api.FleetActive}
		w.Snap.Machines = []*api.Machine{m}
		on := &api.Replica{ID: "web-0", Service: "web", Machine: "m1", State: api.ReplicaRunning}
		moving := &api.Replica{ID: "web-1", Service: "web", Machine: "m2", PreviousMachine: "m1", State: api.ReplicaRunning}
		elsewhere := &api.Replica{ID: "web-2", Service: "web", Machine: "m2", State: api.ReplicaRunning}
		gone := &api.Replica{ID: "web-3", Service: "web", Machine: "m2", State: api.ReplicaRunning}
		w.Snap.Replicas = []*api.Replica{on, moving, elsewhere, gone}
		if kept {
			w.IndexMachines()
			w.IndexReplicas()
			w.OnOrOff = func(machine string) []*api.Replica { return []*api.Replica{moving, on} }
		}
		plan := decide.Plan{Terminates: []decide.Terminate{{Machine: "m1", Reason: "test"}}, DeleteReplicas: []decide.ReplicaDelete{{ID: "web-3", Service: "web"}}}
		if err := w.Apply(plan); err != nil {
			t.Fatal(err)
		}
		if on.Machine != "" || on.State != api.ReplicaPending || moving.PreviousMachine != "" || moving.Machine != "m2" || elsewhere.State != api.ReplicaRunning {
			t.Errorf("kept %v: after the termination %+v %+v %+v", kept, on, moving, elsewhere)
		}
		if len(w.Snap.Replicas) != 3 || w.ReplicaByID("web-3") != nil {
			t.Errorf("kept %v: web-3 was deleted, the replicas are %d", kept, len(w.Snap.Replicas))
		}
	}
}

// A plan's replica deletes, a few or many at once, leave every other
// replica in its place in the list, in a world that indexes them and in
// one that does not.
func TestDeletedReplicasLeaveTheOthersInOrder(t *testing.T) {
	for _, n := range []int{1, 16, 17, 40} {
		for _, indexed := range []bool{false, true} {
			w := world()
			for i := range 60 {
				w.Snap.Replicas = append(w.Snap.Replicas, &api.Replica{ID: fmt.Sprintf("r%02d", i), Service: "s"})
			}
			if indexed {
				w.IndexReplicas()
			}
			gone := map[int]bool{}
			for k := range n {
				gone[k*60/n] = true // n of the 60, spread over the list
			}
			var deletes []decide.ReplicaDelete
			var want []string
			for i, r := range w.Snap.Replicas {
				if gone[i] {
					deletes = append(deletes, decide.ReplicaDelete{ID: r.ID})
					continue
				}
				want = append(want, r.ID)
			}
			deletes = append(deletes, decide.ReplicaDelete{ID: "not-there"})
			if err := w.Apply(decide.Plan{DeleteReplicas: deletes}); err != nil {
				t.Fatal(err)
			}
			var have []string
			for _, r := range w.Snap.Replicas {
				have = append(have, r.ID)
			}
			if !slices.Equal(have, want) {
				t.Fatalf("%d deletes (indexed: %v): left %v, want %v", len(deletes)-1, indexed, have, want)
			}
			for _, d := range deletes {
				if w.ReplicaByID(d.ID) != nil {
					t.Fatalf("%d deletes (indexed: %v): replica %s still found", len(deletes)-1, indexed, d.ID)
				}
			}
		}
	}
}

// A world told which machines may have ended outside its plans (Ended)
// drops those that did, and those its plan's terminate calls ended, and
// keeps every other machine in its place, found again by id.
func TestEndedMachinesLeaveAndTheOthersStay(t *testing.T) {
	w := world()
	var outside []string
	w.Ended = func() []string { return outside }
	w.IndexMachines()
	capacity := api.Resources{MilliCPU: 1000, MemoryBytes: 1 << 30}
	launch := decide.Plan{}
	for range 5 {
		launch.Launches = append(launch.Launches, decide.Launch{Cluster: "c", Group: "g", InstanceType: "small", Zone: "a", Capacity: capacity})
	}
	if err := w.Apply(launch); err != nil {
		t.Fatal(err)
	}
	all := slices.Clone(w.Snap.Machines)
	if err := w.Apply(decide.Plan{Terminates: []decide.Terminate{{Machine: all[3].ID, Reason: "test"}}}); err != nil {
		t.Fatal(err)
	}
	all[1].FleetState = api.FleetTerminated // its instance found gone
	outside = []string{all[1].ID, all[2].ID, "never-was"}
	if err := w.Apply(decide.Plan{TerminateCalls: []string{all[3].ID}}); err != nil {
		t.Fatal(err)
	}
	want := []*api.Machine{all[0], all[2], all[4]}
	if !slices.Equal(w.Snap.Machines, want) {
		t.Fatalf("machines left: %v, want %v", ids(w.Snap.Machines), ids(want))
	}
	for i, m := range all {
		if found := w.MachineByID(m.ID) != nil; found != slices.Contains(want, m) {
			t.Fatalf("machine %d (%s) found by id: %v", i, m.ID, found)
		}
	}
}

func ids(ms []*api.Machine) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.ID)
	}
	return out
}

// Without a Provider, each launch runs at an address of its own, and a
// stopped warm-pool machine runs at its own again once started, as a
// cloud's stopped instance keeps its private address (every started
// machine ran at one address before).
func TestAStartedMachineRunsAtTheAddressItWasLaunchedAt(t *testing.T) {
	w := world()
	capacity := api.Resources{MilliCPU: 1000, MemoryBytes: 1 << 30}
	launch := decide.Launch{Cluster: "c", Group: "g", InstanceType: "small", Zone: "a", Capacity: capacity}
	if err := w.Apply(decide.Plan{Launches: []decide.Launch{launch, launch, launch}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Join(); err != nil {
		t.Fatal(err)
	}
	launchedAt := map[string]string{}
	seen := map[string]bool{}
	var steps []decide.MachineStep
	for _, m := range w.Snap.Machines {
		if len(m.Addresses) != 1 || seen[m.Addresses[0]] {
			t.Fatalf("machine %s launched at %v, beside %v", m.ID, m.Addresses, launchedAt)
		}
		seen[m.Addresses[0]], launchedAt[m.ID] = true, m.Addresses[0]
		steps = append(steps, decide.MachineStep{Machine: m.ID})
	}
	steps = steps[:2]
	if err := w.Apply(decide.Plan{Stops: steps}); err != nil {
		t.Fatal(err)
	}
	for _, s := range steps {
		if m := w.MachineByID(s.Machine); m.FleetState != api.FleetStopped || len(m.Addresses) != 0 {
			t.Fatalf("stopped machine %s: %s at %v", m.ID, m.FleetState, m.Addresses)
		}
	}
	if err := w.Apply(decide.Plan{Starts: steps}); err != nil {
		t.Fatal(err)
	}
	for _, m := range w.Snap.Machines {
		if !slices.Equal(m.Addresses, []string{launchedAt[m.ID]}) {
			t.Fatalf("machine %s runs at %v, launched at %s", m.ID, m.Addresses, launchedAt[m.ID])
		}
	}
}
