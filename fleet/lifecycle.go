package fleet

import (
	"fmt"
	"time"

	"github.com/gantry-dev/gantry/api"
)

// joinMoves are the allowed join-state transitions. An agent may join
// before the provider's launch call returns, so provisioning → joined is
// allowed; joined → joined is a re-join.
var joinMoves = map[string][]string{
	api.JoinProvisioning: {api.JoinBooting, api.JoinJoining, api.JoinJoined, api.JoinFailed},
	api.JoinBooting:      {api.JoinJoining, api.JoinJoined, api.JoinFailed},
	api.JoinJoining:      {api.JoinJoined, api.JoinFailed},
	api.JoinJoined:       {api.JoinJoined},
	api.JoinFailed:       {},
}

// fleetMoves are the allowed fleet-state transitions: ready ⇄ active →
// draining → terminating → terminated; a lost or failed machine goes to
// terminating without draining, a launch that failed straight to
// terminated; an idle warm-pool machine is stopped and started (ready ⇄
// stopped).
var fleetMoves = map[string][]string{
	api.FleetReady:       {api.FleetActive, api.FleetDraining, api.FleetTerminating, api.FleetTerminated, api.FleetStopped},
	api.FleetStopped:     {api.FleetReady, api.FleetTerminating},
	api.FleetActive:      {api.FleetReady, api.FleetDraining, api.FleetTerminating},
	api.FleetDraining:    {api.FleetTerminating},
	api.FleetTerminating: {api.FleetTerminated},
	api.FleetTerminated:  {},
}

// SetJoinState moves a machine's join state, or refuses.
func SetJoinState(m *api.Machine, to string, now time.Time) error {
	if err := check(joinMoves, "join", m.JoinState, to); err != nil {
		return fmt.Errorf("machine %s: %w", m.ID, err)
	}
	if m.JoinState != to {
		m.JoinState, m.StateChangedAt = to, now
	}
	return nil
}

// SetFleetState moves a machine's fleet state, or refuses.
func SetFleetState(m *api.Machine, to string, now time.Time) error {
	if m.FleetState == to {
		return nil
	}
	if err := check(fleetMoves, "fleet", m.FleetState, to); err != nil {
		return fmt.Errorf("machine %s: %w", m.ID, err)
	}
	m.FleetState, m.StateChangedAt = to, now
	return nil
}

func check(moves map[string][]string, kind, from, to string) error {
	allowed, known := moves[from]
	if !known {
		return fmt.Errorf("unknown %s state %q", kind, from)
	}
	for _, a := range allowed {
		if a == to {
			return nil
		}
	}
	return fmt.Errorf("%s state %s → %s is not allowed", kind, from, to)
}
