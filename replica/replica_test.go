package replica

import (
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
)

var now = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Back to pending leaves nothing of the old placement: GPU devices,
// runtime class, ports, address, health, note.
func TestToPendingClearsThePlacement(t *testing.T) {
	r := New("web-0", "web", "c", 0, "h", api.Resources{}, now)
	if err := Assign(r, Placement{Machine: "m1", Address: "10.0.0.1", GPUs: []int{0, 1}, TEE: true, Note: "gpu preferred"}, false, now); err != nil {
		t.Fatal(err)
	}
	if _, err := Observe(r, api.ReplicaStatus{ReplicaID: r.ID, State: api.ReplicaRunning, Health: api.HealthHealthy, HostPorts: map[string]int{"http": 8080}}, "", now); err != nil {
		t.Fatal(err)
	}
	ToPending(r, "machine m1 is terminating", now)
	if r.Machine != "" || r.State != api.ReplicaPending || r.GPUIndexes != nil || r.RuntimeClass != "" || r.HostPorts != nil ||
		r.Address != "" || r.Health != "" || r.Note != "" || r.Reason != "machine m1 is terminating" {
		t.Fatalf("after ToPending: %+v", r)
	}
}

// Only a pending replica is assigned; a running one moves (its old copy
// stays as PreviousMachine until the new one runs, then hands over).
func TestAssignAndMove(t *testing.T) {
	r := New("web-0", "web", "c", 0, "h", api.Resources{}, now)
	if err := Assign(r, Placement{Machine: "m1"}, true, now); err == nil {
		t.Fatal("a replica on no machine moved")
	}
	if err := Assign(r, Placement{Machine: "m1"}, false, now); err != nil {
		t.Fatal(err)
	}
	if err := Assign(r, Placement{Machine: "m2"}, false, now); err == nil {
		t.Fatal("a placed replica was assigned again")
	}
	if _, err := Observe(r, api.ReplicaStatus{State: api.ReplicaRunning}, "", now); err != nil {
		t.Fatal(err)
	}
	if err := Assign(r, Placement{Machine: "m2"}, true, now); err != nil || r.PreviousMachine != "m1" || r.Machine != "m2" || r.State != api.ReplicaAssigned {
		t.Fatalf("move: %+v %v", r, err)
	}
	c, err := Observe(r, api.ReplicaStatus{State: api.ReplicaRunning, Health: api.HealthHealthy}, "10.0.0.2", now)
	// Handed over: the new copy serves; the old one drains on m1.
	if err != nil || c.HandedOver != "m1" || !Draining(r) || r.PreviousMachine != "m1" || r.Address != "10.0.0.2" || !c.StateChanged() || !Available(r) {
		t.Fatalf("handover: %+v %+v %v", r, c, err)
	}
	if c, _ := Observe(r, api.ReplicaStatus{State: api.ReplicaRunning, Health: api.HealthHealthy}, "10.0.0.2", now.Add(time.Second)); c.HandedOver != "" {
		t.Fatalf("a second report handed over again: %+v", c)
	}
	EndMove(r)
	if r.PreviousMachine != "" || r.HandedOverAt != nil || Draining(r) {
		t.Fatalf("after the drain: %+v", r)
	}
}

// A state no table lists is refused.
func TestUnknownStateIsRefused(t *testing.T) {
	r := &api.Replica{ID: "x", State: "exploded"}
	if _, err := Observe(r, api.ReplicaStatus{State: api.ReplicaRunning}, "", now); err == nil {
		t.Fatal("an unknown state moved")
	}
	r = New("y", "s", "c", 0, "h", api.Resources{}, now)
	if _, err := Observe(r, api.ReplicaStatus{State: api.ReplicaRunning}, "", now); err == nil {
		t.Fatal("a pending replica was reported running")
	}
}

// A replica placed before its machine's address was known gets it from
// the next report, even when nothing else changed.
func TestReportFillsAMissingAddress(t *testing.T) {
	r := New("web-0", "web", "c", 0, "h", api.Resources{}, now)
	if err := Assign(r, Placement{Machine: "m1"}, false, now); err != nil {
		t.Fatal(err)
	}
	st := api.ReplicaStatus{ReplicaID: r.ID, State: api.ReplicaRunning}
	if _, err := Observe(r, st, "", now); err != nil {
		t.Fatal(err)
	}
	c, err := Observe(r, st, "127.0.0.1", now)
	if err != nil || !c.Changed || r.Address != "127.0.0.1" {
		t.Fatalf("%+v %+v %v", r, c, err)
	}
}

// A Pod's replica follows its pod watch between any two pod states (a Pod
// waits for a node in pending, then runs; its phase may end in exited or
// unknown); a machine's replica in pending is never reported running.
func TestPodReplicaFollowsItsWatch(t *testing.T) {
	r := New("web-0", "web", "k8s", 0, "h", api.Resources{}, now)
	if err := Assign(r, Placement{Pod: "apps/web-0"}, false, now); err != nil || r.Pod != "apps/web-0" || r.Machine != "" {
		t.Fatalf("assign as a Pod: %+v %v", r, err)
	}
	if err := Assign(r, Placement{Pod: "apps/web-0"}, false, now); err == nil {
		t.Fatal("a replica placed as a Pod was placed again")
	}
	for _, st := range []api.ReplicaState{api.ReplicaPending, api.ReplicaRunning, api.ReplicaExited, api.ReplicaUnknown, api.ReplicaPending, api.ReplicaCrashed} {
		if _, err := Observe(r, api.ReplicaStatus{ReplicaID: r.ID, State: st, Node: "n1"}, "10.244.0.7", now); err != nil || r.State != st || r.Node != "n1" {
			t.Fatalf("pod watch says %s: %+v %v", st, r, err)
		}
	}
	ToPending(r, "evicted", now)
	if r.Pod != "" || r.Node != "" {
		t.Fatalf("ToPending kept the Pod: %+v", r)
	}
	m := New("m-0", "web", "c", 0, "h", api.Resources{}, now)
	if _, err := Observe(m, api.ReplicaStatus{State: api.ReplicaExited}, "", now); err == nil {
		t.Fatal("a machine's replica took a Pod-only state")
	}
}

// Replica ids are reused: a report from an earlier incarnation (the old
// process of a replica made again under its id on the same machine) or
// of another revision does not land on the new replica.
func TestReportsOfAnotherIncarnationAreIgnored(t *testing.T) {
	old := New("web-0", "web", "c", 0, "h1", api.Resources{}, now)
	if err := Assign(old, Placement{Machine: "m1"}, false, now); err != nil {
		t.Fatal(err)
	}
	later := now.Add(time.Second)
	r := New("web-0", "web", "c", 0, "h1", api.Resources{}, later)
	if err := Assign(r, Placement{Machine: "m1"}, false, later); err != nil {
		t.Fatal(err)
	}
	if r.Incarnation == "" || r.Incarnation == old.Incarnation {
		t.Fatalf("incarnations %q and %q: want two different ones", old.Incarnation, r.Incarnation)
	}
	report := func(st api.ReplicaStatus) []Applied {
		st.ReplicaID, st.State = "web-0", api.ReplicaRunning
		applied, err := Apply([]*api.Replica{r}, Report{Holder: "m1", Statuses: []api.ReplicaStatus{st}}, later)
		if err != nil {
			t.Fatal(err)
		}
		return applied
	}
	if got := report(api.ReplicaStatus{Incarnation: old.Incarnation, SpecHash: "h1"}); len(got) != 0 || r.State != api.ReplicaAssigned {
		t.Fatalf("the old incarnation's report landed: %+v", r)
	}
	if got := report(api.ReplicaStatus{Incarnation: r.Incarnation, SpecHash: "h0"}); len(got) != 0 {
		t.Fatal("another revision's report landed")
	}
	if got := report(api.ReplicaStatus{Incarnation: r.Incarnation, SpecHash: "h1"}); len(got) != 1 || r.State != api.ReplicaRunning {
		t.Fatalf("its own report did not land: %+v", r)
	}
}
