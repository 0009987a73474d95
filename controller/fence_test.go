package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/decide"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/provisioner/fake"
	"github.com/gantry-dev/gantry/store"
)

// lostAnswer stores a joined machine whose launch answer never arrived
// (no ProviderID), while its instance runs, tagged with its id.
func lostAnswer(e *env, fleetState api.FleetState) *api.Machine {
	m := &api.Machine{ID: "c-g-lost", Cluster: "c", Group: "g", InstanceType: "fake.small", Provider: "fake", ProviderKey: "fake", LaunchKey: "lk-1",
		JoinState: api.JoinJoined, FleetState: fleetState, CreatedAt: start, JoinedAt: &start, LastHeartbeat: &start, StateChangedAt: start,
		ReportedInstance: "i-real"}
	e.update(func(tx store.Tx) error { return tx.CreateMachine(m) })
	e.fakes["fake"].Add(instance("i-real", m.ID, start))
	return m
}

func fakeState(e *env, id string) provisioner.State {
	for _, inst := range e.fakes["fake"].Instances() {
		if inst.ID == id {
			return inst.State
		}
	}
	return ""
}

func fenceOutcomes(e *env) []decide.Outcome {
	var out []decide.Outcome
	for _, o := range e.memory().Outcomes {
		if o.Call == decide.CallFence {
			out = append(out, o)
		}
	}
	return out
}

// A fence of a machine whose instance id is unknown finds the instance by
// its tags and stops it; it is never confirmed without a provider's
// answer.
func TestFenceFindsAnUnknownInstanceByItsTags(t *testing.T) {
	e := newEnv(t)
	e.apply(twoMachines)
	m := lostAnswer(e, api.FleetActive)

	e.fakes["fake"].SetNextError(fake.OpList, provisioner.Errorf(provisioner.KindTransport, "list", "connection reset"))
	e.ctrl.calls.fence(decide.Fence{Machine: m.ID, Group: "pg"}, "fake")
	e.ctrl.Wait()
	if got := fenceOutcomes(e); len(got) != 1 || got[0].Error == "" {
		t.Fatalf("a fence the provider never answered: outcomes %+v, want one failure", got)
	}
	if fakeState(e, "i-real") != provisioner.StateRunning {
		t.Fatal("the instance changed without a call")
	}

	e.ctrl.calls.fence(decide.Fence{Machine: m.ID, Group: "pg"}, "fake")
	e.ctrl.Wait()
	if s := fakeState(e, "i-real"); s != provisioner.StateTerminated {
		t.Fatalf("the instance found by its tags is %s, want terminated", s)
	}
	confirmed := 0
	for _, o := range fenceOutcomes(e) {
		if o.Error == "" {
			confirmed++
		}
	}
	if confirmed != 1 {
		t.Fatalf("%d confirmed fences, want 1", confirmed)
	}
	if got := e.machines()[0]; got.ProviderID != "i-real" {
		t.Fatalf("the instance found was not recorded: providerId %q", got.ProviderID)
	}
}

// Terminating such a machine terminates its instance, found by its tags,
// before the machine is recorded terminated; nothing is leaked.
func TestTerminateFindsAnUnknownInstanceByItsTags(t *testing.T) {
	e := newEnv(t)
	e.apply(twoMachines)
	m := lostAnswer(e, api.FleetTerminating)
	e.fakes["fake"].SetNextError(fake.OpList, provisioner.Errorf(provisioner.KindTransport, "list", "connection reset"))
	e.ctrl.calls.terminate(m.ID, "fake", "")
	e.ctrl.Wait()
	if got := e.machines()[0]; got.FleetState != api.FleetTerminating {
		t.Fatalf("machine %s without a provider's answer, want still terminating", got.FleetState)
	}
	e.ctrl.calls.terminate(m.ID, "fake", "")
	e.ctrl.Wait()
	if s := fakeState(e, "i-real"); s != provisioner.StateTerminated {
		t.Fatalf("the instance is %s: leaked", s)
	}
	got := e.machines()[0]
	if got.FleetState != api.FleetTerminated {
		t.Fatalf("machine %s, want terminated", got.FleetState)
	}
	found := false
	for _, ev := range e.events("Machine", m.ID) {
		found = found || (ev.Reason == "Terminated" && strings.Contains(ev.Message, "i-real"))
	}
	if !found {
		t.Fatal("no Terminated event naming the instance")
	}
}

// A provider call runs under the leadership term: when the term ends
// (the lease was lost), a call in flight is cancelled and Run returns,
// rather than the call going on for its ProviderTimeout after another
// server may have begun to lead.
func TestProviderCallsEndWithTheTerm(t *testing.T) {
	e := newEnv(t)
	e.cfg.Calls.ProviderTimeout = 24 * time.Hour
	e.restart()
	e.apply(twoMachines)
	e.fakes["fake"].Hang(fake.OpLaunch, true)
	t.Cleanup(func() { e.fakes["fake"].Hang(fake.OpLaunch, false) })
	term, endTerm := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { defer close(ran); e.ctrl.Run(term) }()
	if err := e.fakes["fake"].Await(context.Background(), func() bool { return e.fakes["fake"].InFlight(fake.OpLaunch) == 2 }); err != nil {
		t.Fatal(err)
	}
	endTerm()
	<-ran // without the term's context this waits a day for the hung launches
	launches := e.fakes["fake"].Calls(fake.OpLaunch)
	if len(launches) != 2 || launches[0].Err == nil || launches[1].Err == nil {
		t.Fatalf("launches %+v: want both cancelled", launches)
	}
	// A later term (or TerminateAll on shutdown) calls providers again.
	e.fakes["fake"].Hang(fake.OpLaunch, false)
	e.pass()
	if n := len(e.fakes["fake"].Calls(fake.OpLaunch)); n <= 2 {
		t.Fatalf("no launch after the term ended: %d calls", n)
	}
}
