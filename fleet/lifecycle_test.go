package fleet

import (
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/provisioner"
)

func TestFleetTransitions(t *testing.T) {
	allowed := [][2]api.FleetState{
		{api.FleetReady, api.FleetActive}, {api.FleetActive, api.FleetReady}, {api.FleetActive, api.FleetDraining},
		{api.FleetDraining, api.FleetTerminating}, {api.FleetTerminating, api.FleetTerminated},
		{api.FleetActive, api.FleetTerminating}, {api.FleetReady, api.FleetTerminated},
	}
	refused := [][2]api.FleetState{
		{api.FleetTerminated, api.FleetReady}, {api.FleetTerminating, api.FleetActive}, {api.FleetDraining, api.FleetActive},
		{api.FleetActive, api.FleetTerminated}, {api.FleetTerminated, api.FleetTerminating}, {"bogus", api.FleetReady},
	}
	now := time.Now()
	for _, c := range allowed {
		m := &api.Machine{ID: "m", FleetState: c[0]}
		if err := SetFleetState(m, c[1], now); err != nil || m.FleetState != c[1] || !m.StateChangedAt.Equal(now) {
			t.Errorf("%s → %s refused: %v", c[0], c[1], err)
		}
	}
	for _, c := range refused {
		m := &api.Machine{ID: "m", FleetState: c[0]}
		if err := SetFleetState(m, c[1], now); err == nil || m.FleetState != c[0] {
			t.Errorf("%s → %s allowed", c[0], c[1])
		}
	}
}

func TestJoinTransitions(t *testing.T) {
	now := time.Now()
	for _, c := range [][2]api.JoinState{{api.JoinProvisioning, api.JoinBooting}, {api.JoinBooting, api.JoinJoined}, {api.JoinProvisioning, api.JoinJoined}, {api.JoinJoined, api.JoinJoined}, {api.JoinBooting, api.JoinFailed}} {
		if err := SetJoinState(&api.Machine{JoinState: c[0]}, c[1], now); err != nil {
			t.Errorf("%s → %s refused: %v", c[0], c[1], err)
		}
	}
	for _, c := range [][2]api.JoinState{{api.JoinJoined, api.JoinBooting}, {api.JoinFailed, api.JoinJoined}, {api.JoinJoined, api.JoinFailed}, {api.JoinJoining, api.JoinProvisioning}} {
		if err := SetJoinState(&api.Machine{JoinState: c[0]}, c[1], now); err == nil {
			t.Errorf("%s → %s allowed", c[0], c[1])
		}
	}
}

// An agent that joined before its launch call returned keeps the address
// it reported when the provider answers without one (defect seen under
// provider latency: replicas then had no address to answer at).
func TestLaunchAnswerAfterJoinKeepsAddresses(t *testing.T) {
	now := time.Now()
	m := &api.Machine{ID: "m", JoinState: api.JoinProvisioning, FleetState: api.FleetReady}
	if err := Joined(m, api.Inventory{Addresses: []string{"127.0.0.1"}}, now); err != nil {
		t.Fatal(err)
	}
	if err := Launched(m, provisioner.Instance{ID: "i-1", State: provisioner.StatePending}, now); err != nil {
		t.Fatal(err)
	}
	if m.ProviderID != "i-1" || len(m.Addresses) != 1 || m.JoinState != api.JoinJoined {
		t.Fatalf("after a late launch answer: %+v", m)
	}
}

// A drain of a machine already draining or leaving changes nothing and is
// no error.
func TestSecondDrainChangesNothing(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, state := range []api.FleetState{api.FleetDraining, api.FleetTerminating, api.FleetTerminated} {
		m := &api.Machine{ID: "m", JoinState: api.JoinJoined, FleetState: state}
		if changed, err := Drain(m, "again", now.Add(time.Minute), now); changed || err != nil || m.FleetState != state {
			t.Errorf("drain of a %s machine: changed %v, err %v, now %s", state, changed, err, m.FleetState)
		}
	}
}

func TestCordonSaysWhetherItChangedTheMachine(t *testing.T) {
	m := &api.Machine{ID: "m1"}
	if !Cordon(m, true) || !m.Cordoned {
		t.Fatalf("cordon an uncordoned machine: %+v", m)
	}
	if Cordon(m, true) {
		t.Fatal("cordoning a cordoned machine changed it")
	}
	if !Cordon(m, false) || m.Cordoned {
		t.Fatalf("uncordon: %+v", m)
	}
}
