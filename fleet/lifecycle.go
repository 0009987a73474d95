package fleet

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/provisioner"
)

// This file owns a machine's state: its join and fleet states, and the
// fields that move with them (reachability, activity, drain deadline,
// provider id). Nothing else writes them; the control loop's decisions
// and the server's join and heartbeat handlers call these functions, on
// their working copies and in store transactions alike.

// transitions is a state machine's table: the states each one may move to.
type transitions[S ~string] map[S][]S

func (t transitions[S]) check(kind string, from, to S) error {
	allowed, known := t[from]
	if !known {
		return fmt.Errorf("unknown %s state %q", kind, from)
	}
	if !slices.Contains(allowed, to) {
		return fmt.Errorf("%s state %s → %s is not allowed", kind, from, to)
	}
	return nil
}

// joinMoves are the allowed join-state transitions. An agent may join
// before the provider's launch call returns, so provisioning → joined is
// allowed; joined → joined is a re-join.
var joinMoves = transitions[api.JoinState]{
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
var fleetMoves = transitions[api.FleetState]{
	api.FleetReady:       {api.FleetActive, api.FleetDraining, api.FleetTerminating, api.FleetTerminated, api.FleetStopped},
	api.FleetStopped:     {api.FleetReady, api.FleetTerminating},
	api.FleetActive:      {api.FleetReady, api.FleetDraining, api.FleetTerminating},
	api.FleetDraining:    {api.FleetTerminating},
	api.FleetTerminating: {api.FleetTerminated},
	api.FleetTerminated:  {},
}

// SetJoinState moves a machine's join state, or refuses.
func SetJoinState(m *api.Machine, to api.JoinState, now time.Time) error {
	if err := joinMoves.check("join", m.JoinState, to); err != nil {
		return fmt.Errorf("machine %s: %w", m.ID, err)
	}
	if m.JoinState != to {
		m.JoinState, m.StateChangedAt = to, now.UTC()
	}
	return nil
}

// SetFleetState moves a machine's fleet state, or refuses.
func SetFleetState(m *api.Machine, to api.FleetState, now time.Time) error {
	if m.FleetState == to {
		return nil
	}
	if err := fleetMoves.check("fleet", m.FleetState, to); err != nil {
		return fmt.Errorf("machine %s: %w", m.ID, err)
	}
	m.FleetState, m.StateChangedAt = to, now.UTC()
	return nil
}

// Launched records the instance a provider made for a launch intent. An
// agent may have joined before the launch call returned: addresses it
// reported stay unless the provider knows some.
func Launched(m *api.Machine, inst provisioner.Instance, now time.Time) error {
	if m.ProviderID != inst.ID || m.InstanceKnownAt == nil {
		t := now.UTC()
		m.InstanceKnownAt = &t
	}
	m.ProviderID = inst.ID
	if len(inst.Addresses) > 0 {
		m.Addresses = inst.Addresses
	}
	if inst.Zone != "" {
		m.Zone = inst.Zone
	}
	if m.JoinState == api.JoinProvisioning {
		return SetJoinState(m, api.JoinBooting, now)
	}
	return nil
}

// LaunchFailed ends a machine whose launch the provider refused.
func LaunchFailed(m *api.Machine, why string, now time.Time) error {
	if err := SetJoinState(m, api.JoinFailed, now); err != nil {
		return err
	}
	m.Reason = why
	return SetFleetState(m, api.FleetTerminated, now)
}

// Joined applies a join: the agent's inventory, and a fresh heartbeat.
func Joined(m *api.Machine, inv api.Inventory, now time.Time) error {
	ApplyInventory(m, inv)
	if err := SetJoinState(m, api.JoinJoined, now); err != nil {
		return err
	}
	t := now.UTC()
	m.JoinedAt, m.LastHeartbeat, m.Reason, m.UnreachableSince = &t, &t, "", nil
	return nil
}

// ApplyInventory records what the agent reports of its machine.
func ApplyInventory(m *api.Machine, inv api.Inventory) {
	if inv.InstanceID != "" {
		m.ReportedInstance = inv.InstanceID
	}
	m.Capacity = inv.Capacity
	m.Runtimes = append([]string(nil), inv.Runtimes...)
	sort.Strings(m.Runtimes)
	m.GPUs = inv.GPUs
	if inv.Zone != "" {
		m.Zone = inv.Zone
	}
	if len(inv.Addresses) > 0 {
		m.Addresses = inv.Addresses
	}
	if inv.TemplateVersion != "" {
		m.TemplateVersion = inv.TemplateVersion
	}
	if inv.DNSAddress != "" {
		m.DNSAddress = inv.DNSAddress
	}
	m.Conditions = inv.Conditions
	if inv.MeshKey != "" {
		m.MeshKey, m.MeshEndpoint = inv.MeshKey, inv.MeshEndpoint
	}
	if len(inv.Labels) > 0 {
		labels := make(map[string]string, len(m.Labels)+len(inv.Labels))
		for k, v := range m.Labels {
			labels[k] = v
		}
		for k, v := range inv.Labels {
			labels[k] = v
		}
		m.Labels = labels
	}
}

// Heartbeat records a heartbeat; it reports whether the machine was
// unreachable until now.
func Heartbeat(m *api.Machine, now time.Time) (cameBack bool) {
	t := now.UTC()
	m.LastHeartbeat = &t
	if m.UnreachableSince == nil {
		return false
	}
	m.UnreachableSince, m.Reason = nil, ""
	return true
}

// MarkUnreachable records that a joined machine stopped heartbeating; it
// reports whether that is news.
func MarkUnreachable(m *api.Machine, why string, now time.Time) bool {
	if m.UnreachableSince != nil {
		// Still unreachable: a new reason (kept, and why) replaces the old.
		changed := m.Reason != why
		m.Reason = why
		return changed
	}
	t := now.UTC()
	m.UnreachableSince, m.Reason = &t, why
	return true
}

// UpdateActivity moves a machine between ready (empty) and active.
func UpdateActivity(m *api.Machine, replicas int, now time.Time) {
	switch {
	case m.FleetState == api.FleetReady && replicas > 0:
		m.FleetState, m.StateChangedAt = api.FleetActive, now.UTC()
	case m.FleetState == api.FleetActive && replicas == 0:
		m.FleetState, m.StateChangedAt = api.FleetReady, now.UTC()
	}
}

// Drain marks a machine draining until deadline; false if it already was,
// or is already leaving (a second drain is no error, as with kubectl).
func Drain(m *api.Machine, why string, deadline, now time.Time) (bool, error) {
	switch m.FleetState {
	case api.FleetDraining, api.FleetTerminating, api.FleetTerminated:
		return false, nil // drained already, or on its way: nothing to do
	}
	if err := SetFleetState(m, api.FleetDraining, now); err != nil {
		return false, err
	}
	d := deadline.UTC()
	m.DrainDeadline, m.Reason = &d, why
	return true, nil
}

// Terminating marks a machine terminating; false if it already was (or is
// gone).
func Terminating(m *api.Machine, why string, now time.Time) (bool, error) {
	if m.FleetState == api.FleetTerminating || m.FleetState == api.FleetTerminated {
		return false, nil
	}
	if err := SetFleetState(m, api.FleetTerminating, now); err != nil {
		return false, err
	}
	m.Reason = why
	return true, nil
}

// Stopped records a warm-pool machine whose instance stopped.
func Stopped(m *api.Machine, now time.Time) error {
	if err := SetFleetState(m, api.FleetStopped, now); err != nil {
		return err
	}
	m.Reason, m.Addresses = "", nil
	return nil
}

// Started records a warm-pool machine started again, at the addresses the
// provider gave, with a fresh heartbeat window.
func Started(m *api.Machine, addresses []string, now time.Time) error {
	if err := SetFleetState(m, api.FleetReady, now); err != nil {
		return err
	}
	t := now.UTC()
	m.Reason, m.Addresses, m.LastHeartbeat, m.UnreachableSince = "", addresses, &t, nil
	return nil
}

// Cordon marks a machine unschedulable (or schedulable again): new
// replicas go elsewhere, those it runs stay. It reports whether that
// changed anything.
func Cordon(m *api.Machine, cordon bool) bool {
	if m.Cordoned == cordon {
		return false
	}
	m.Cordoned = cordon
	return true
}
