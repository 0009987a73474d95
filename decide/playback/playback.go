// Package playback plays a decide plan back onto its snapshot the way the
// act step, obliging providers and the machines' agents would, without a
// store: what the decision harness (decide/decidetest) steps its tests
// through, and what a simulation of the control loop needs (issue 33),
// so that both run the production decide against one model of the world
// around it rather than two.
package playback

import (
	"fmt"
	"slices"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/decide"
	"github.com/gantry-dev/gantry/fleet"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/replica"
	"github.com/gantry-dev/gantry/spec"
)

// World is a snapshot and its time.
type World struct {
	Snap *decide.Snapshot
	Now  time.Time
	// Provider answers the plan's launch and terminate calls; nil: at
	// once, and they succeed.
	Provider Provider
	// OnOrOff, when set, gives the replicas on a machine or moving off
	// it (at least those: ReplicasOnOrOff checks each), in any order, for
	// a caller that keeps them by machine; nil: a walk of every replica.
	OnOrOff func(machine string) []*api.Replica
	// Ended, when set, names every machine that may have ended since the
	// last Apply other than by that Apply's plan (its instance found gone,
	// say): Apply then drops from the snapshot those of them, and of its
	// plan's terminate calls, that ended, not every machine it finds ended
	// in a walk of them all for each plan. It needs IndexMachines.
	Ended func() []string
	seq   int
	// launches counts the instances the world launched or started without
	// a Provider, each at an address of its own (InstanceAddress);
	// stoppedAt are the addresses of the machines it stopped, which they
	// run at again once started, as a cloud's stopped instance keeps its
	// private address.
	launches  int
	stoppedAt map[string][]string
	// byID indexes the replicas, when IndexReplicas asked for it;
	// machineByID the machines, when IndexMachines did.
	byID        map[string]*api.Replica
	machineByID map[string]*api.Machine
}

// IndexMachines makes MachineByID a lookup that Apply keeps up to date:
// for a caller whose machines Apply alone adds and drops (a fleet's
// launch looked each of 10,000 machines up among them all).
func (w *World) IndexMachines() {
	w.machineByID = make(map[string]*api.Machine, len(w.Snap.Machines))
	for _, m := range w.Snap.Machines {
		w.machineByID[m.ID] = m
	}
}

// IndexReplicas makes ReplicaByID a lookup that Apply keeps up to date:
// for a caller whose replicas Apply alone makes and deletes.
func (w *World) IndexReplicas() {
	w.byID = make(map[string]*api.Replica, len(w.Snap.Replicas))
	for _, r := range w.Snap.Replicas {
		w.byID[r.ID] = r
	}
}

// Provider is the world's side of the plan's provider calls: a
// simulation's answers them late, or not at all.
type Provider interface {
	// Launch is told of the launch call of an intent: the instance, and
	// true, when it answers now; false when its answer comes later (the
	// machine stays an intent until then).
	Launch(m *api.Machine) (provisioner.Instance, bool)
	// Terminate is told of the terminate call of a terminating machine:
	// true when the instance is gone now.
	Terminate(m *api.Machine) bool
	// Start is told of the start call of a stopped warm-pool machine: the
	// addresses its instance runs at again (a stopped instance keeps its
	// private address, as a cloud's does).
	Start(m *api.Machine) []string
}

// startedAt are the addresses a started warm-pool machine runs at: its
// provider's, or without one those it ran at before it was stopped (a
// new one's for a machine the world did not stop).
func (w *World) startedAt(m *api.Machine) []string {
	if w.Provider != nil {
		return w.Provider.Start(m)
	}
	if addresses, ok := w.stoppedAt[m.ID]; ok {
		delete(w.stoppedAt, m.ID)
		return addresses
	}
	return []string{w.nextAddress()}
}

// stop stops a machine, keeping the addresses it ran at for its start.
func (w *World) stop(m *api.Machine) error {
	if w.Provider == nil && len(m.Addresses) > 0 {
		if w.stoppedAt == nil {
			w.stoppedAt = map[string][]string{}
		}
		w.stoppedAt[m.ID] = m.Addresses
	}
	return fleet.Stopped(m, w.Now)
}

// nextAddress is the address of the next instance the world launches.
func (w *World) nextAddress() string {
	w.launches++
	return InstanceAddress(w.launches - 1)
}

// InstanceAddress is the address of the nth instance launched (from 0):
// 10.2.0.1 onward, 250 to a /24, then the next /16; unique for the
// first 15 million launches (a week of 10,000 machines launches about
// 70,000).
func InstanceAddress(n int) string {
	return fmt.Sprintf("10.%d.%d.%d", 2+n/(250*250)%250, n/250%250, n%250+1)
}

// answerLaunch gives an intent the instance its provider answers with now,
// if it does.
func (w *World) answerLaunch(m *api.Machine) error {
	if w.Provider == nil {
		return fleet.Launched(m, provisioner.Instance{ID: "i-" + m.ID, Addresses: []string{w.nextAddress()}}, w.Now)
	}
	inst, now := w.Provider.Launch(m)
	if !now {
		return nil
	}
	return fleet.Launched(m, inst, w.Now)
}

// Next is a number no earlier call returned, for names.
func (w *World) Next() int {
	w.seq++
	return w.seq
}

// Apply plays a plan back as the act step and prompt, obliging providers
// would: intents get an instance at once, terminations finish at once
// (unless World.Provider answers otherwise),
// warm-pool machines stop and start. An error is a plan naming what the
// snapshot does not hold, or a change the fleet's rules refuse.
func (w *World) Apply(p decide.Plan) error {
	w.Snap.ConsolidatedAt = p.ConsolidatedAt // the loop hands it on, as the controller does
	if err := w.applyReplicas(p); err != nil {
		return err
	}
	for _, s := range p.Unreachable {
		m, err := w.machine(s.Machine)
		if err != nil {
			return err
		}
		fleet.MarkUnreachable(m, s.Reason, w.Now)
	}
	for _, a := range p.Adoptions {
		if err := w.onMachine(a.Machine, func(m *api.Machine) error { return fleet.Launched(m, a.Instance, w.Now) }); err != nil {
			return err
		}
	}
	for _, d := range p.Drains {
		if err := w.onMachine(d.Machine, func(m *api.Machine) error {
			_, err := fleet.Drain(m, d.Reason, d.Deadline, w.Now)
			return err
		}); err != nil {
			return err
		}
	}
	for _, t := range p.Terminates {
		if err := w.terminate(t); err != nil {
			return err
		}
	}
	for _, l := range p.Launches {
		if err := w.launch(l); err != nil {
			return err
		}
	}
	for _, id := range p.LaunchCalls {
		if err := w.onMachine(id, w.answerLaunch); err != nil {
			return err
		}
	}
	for _, id := range p.TerminateCalls {
		if err := w.onMachine(id, func(m *api.Machine) error {
			if w.Provider != nil && !w.Provider.Terminate(m) {
				return nil
			}
			return fleet.SetFleetState(m, api.FleetTerminated, w.Now)
		}); err != nil {
			return err
		}
	}
	for _, s := range p.Stops {
		if err := w.onMachine(s.Machine, w.stop); err != nil {
			return err
		}
	}
	for _, s := range p.Starts {
		if err := w.onMachine(s.Machine, func(m *api.Machine) error { return fleet.Started(m, w.startedAt(m), w.Now) }); err != nil {
			return err
		}
	}
	if err := w.applyPlacements(p); err != nil {
		return err
	}
	if w.Ended != nil && w.machineByID != nil {
		w.dropEnded(w.endedAmong(p.TerminateCalls, w.Ended()))
		return nil
	}
	w.Snap.Machines = slices.DeleteFunc(w.Snap.Machines, func(m *api.Machine) bool {
		if m.Live() {
			return false
		}
		if w.machineByID != nil {
			delete(w.machineByID, m.ID)
		}
		return true
	})
	return nil
}

// endedAmong are the machines of the lists of ids in the snapshot that
// ended, each once.
func (w *World) endedAmong(lists ...[]string) []*api.Machine {
	var ended []*api.Machine
	for _, ids := range lists {
		for _, id := range ids {
			if m := w.machineByID[id]; m != nil && !m.Live() && !slices.Contains(ended, m) {
				ended = append(ended, m)
			}
		}
	}
	return ended
}

// dropEnded drops the ended machines from the snapshot, found among the
// others by their pointers, without reading each machine (a cache miss
// each at 10,000 machines, whenever one ended).
func (w *World) dropEnded(ended []*api.Machine) {
	if len(ended) == 0 {
		return
	}
	w.Snap.Machines = slices.DeleteFunc(w.Snap.Machines, among(ended))
	for _, m := range ended {
		delete(w.machineByID, m.ID)
	}
}

// onMachine does a step to a machine of the snapshot.
func (w *World) onMachine(id string, step func(m *api.Machine) error) error {
	m, err := w.machine(id)
	if err != nil {
		return err
	}
	return step(m)
}

func (w *World) machine(id string) (*api.Machine, error) {
	if m := w.MachineByID(id); m != nil {
		return m, nil
	}
	return nil, fmt.Errorf("the plan names machine %s, which the snapshot does not have", id)
}

// MachineByID finds a live machine.
func (w *World) MachineByID(id string) *api.Machine {
	if w.machineByID != nil {
		return w.machineByID[id]
	}
	for _, m := range w.Snap.Machines {
		if m.ID == id {
			return m
		}
	}
	return nil
}

// ReplicaByID finds a replica.
func (w *World) ReplicaByID(id string) *api.Replica {
	if w.byID != nil {
		return w.byID[id]
	}
	for _, r := range w.Snap.Replicas {
		if r.ID == id {
			return r
		}
	}
	return nil
}

// ServiceByName finds a service.
func (w *World) ServiceByName(name string) *api.Service {
	for _, s := range w.Snap.Services {
		if s.Metadata.Name == name {
			return s
		}
	}
	return nil
}

func (w *World) applyReplicas(p decide.Plan) error {
	for _, r := range p.CreateReplicas {
		c := *r
		w.Snap.Replicas = append(w.Snap.Replicas, &c)
		if w.byID != nil {
			w.byID[c.ID] = &c
		}
	}
	for _, rv := range p.Reverts {
		svc := w.ServiceByName(rv.Service)
		if svc == nil {
			return fmt.Errorf("the plan reverts service %s, which the snapshot does not have", rv.Service)
		}
		if svc.Metadata.Generation == rv.Generation {
			svc.Spec = spec.WithTemplate(svc.Spec, rv.To.Spec)
			svc.Metadata.Generation++
		}
	}
	if len(p.DeleteReplicas) > 0 {
		w.deleteReplicas(p.DeleteReplicas)
	}
	for _, id := range p.EndMoves {
		if r := w.ReplicaByID(id); r != nil && replica.Draining(r) {
			replica.EndMove(r)
		}
	}
	for _, d := range p.RetireReplicas {
		if r := w.ReplicaByID(d.ID); r != nil && r.RetiringSince == nil {
			now := w.Now
			r.RetiringSince, r.RetireReason = &now, d.Reason
		}
	}
	return nil
}

// ReplicasOnOrOff are the replicas on the machine or moving off it: from
// OnOrOff when the caller keeps them by machine, else by a walk of every
// replica. OnOrOff's come in its order, the walk's in the snapshot's.
func (w *World) ReplicasOnOrOff(machine string) []*api.Replica {
	candidates := w.Snap.Replicas
	if w.OnOrOff != nil {
		candidates = w.OnOrOff(machine)
	}
	var out []*api.Replica
	for _, r := range candidates {
		if r.Machine == machine || r.PreviousMachine == machine {
			out = append(out, r)
		}
	}
	return out
}

// deleteReplicas drops the replicas deleted from the snapshot's list.
// Indexed, it knows them by pointer, so that the walk of the list reads
// no replica (a cache miss each of 60,000).
func (w *World) deleteReplicas(deletes []decide.ReplicaDelete) {
	if w.byID == nil {
		deleted := make(map[string]bool, len(deletes))
		for _, d := range deletes {
			deleted[d.ID] = true
		}
		w.Snap.Replicas = slices.DeleteFunc(w.Snap.Replicas, func(r *api.Replica) bool { return deleted[r.ID] })
		return
	}
	gone := make([]*api.Replica, 0, len(deletes))
	for _, d := range deletes {
		if r := w.byID[d.ID]; r != nil {
			gone = append(gone, r)
			delete(w.byID, d.ID)
		}
	}
	if len(gone) > 0 {
		w.Snap.Replicas = slices.DeleteFunc(w.Snap.Replicas, among(gone))
	}
}

// among is whether an object is one of those, by pointer: for a few,
// compared with each (a map lookup for each of 60,000 replicas cost more
// than the compares); for many, looked up.
func among[T any](those []*T) func(*T) bool {
	const few = 16
	if len(those) <= few {
		return func(o *T) bool { return slices.Contains(those, o) }
	}
	set := make(map[*T]bool, len(those))
	for _, o := range those {
		set[o] = true
	}
	return func(o *T) bool { return set[o] }
}

func (w *World) terminate(t decide.Terminate) error {
	m, err := w.machine(t.Machine)
	if err != nil {
		return err
	}
	if changed, err := fleet.Terminating(m, t.Reason, w.Now); err != nil || !changed {
		return err
	}
	for _, r := range w.ReplicasOnOrOff(m.ID) {
		if r.PreviousMachine == m.ID {
			replica.EndMove(r)
		}
		if r.Machine == m.ID {
			replica.ToPending(r, "machine "+m.ID+" is terminating: "+t.Reason, w.Now)
		}
	}
	return nil
}

// launch records an intent and sends its launch call: answered at once
// (by default), the machine is booting.
func (w *World) launch(l decide.Launch) error {
	n := w.Next()
	id := fmt.Sprintf("%s-%s-n%d", l.Cluster, l.Group, n)
	cl := w.Snap.Clusters[l.Cluster]
	if cl == nil {
		return fmt.Errorf("the plan launches into cluster %s, which the snapshot does not have", l.Cluster)
	}
	g, _ := cl.Group(l.Group)
	m := &api.Machine{ID: id, Cluster: l.Cluster, Group: l.Group, InstanceType: l.InstanceType, Zone: l.Zone, CapacityType: l.CapacityType,
		PricePerHour: l.PricePerHour, Provider: cl.Spec.Provider.Name, ProviderKey: l.ProviderKey,
		LaunchKey: "lk-" + id, Subnet: fmt.Sprintf("10.245.%d.0/24", n), TemplateHash: spec.TemplateHash(cl, l.Group), Labels: g.Labels, Capacity: l.Capacity,
		JoinState: api.JoinProvisioning, FleetState: api.FleetReady, CreatedAt: w.Now, StateChangedAt: w.Now, Replaces: l.Replaces}
	w.Snap.Machines = append(w.Snap.Machines, m)
	if w.machineByID != nil {
		w.machineByID[m.ID] = m
	}
	return w.answerLaunch(m)
}

func (w *World) applyPlacements(p decide.Plan) error {
	for _, e := range p.Evictions {
		if r := w.ReplicaByID(e.Replica); r != nil && r.Machine == e.Machine {
			replica.ToPending(r, "preempted by "+e.By, w.Now)
		}
	}
	for _, a := range p.Assignments {
		r := w.ReplicaByID(a.Replica)
		if r == nil {
			return fmt.Errorf("assignment of unknown replica %s", a.Replica)
		}
		if err := replica.Assign(r, a.Placement, a.Moving(), w.Now); err != nil {
			return err
		}
	}
	for _, id := range p.PendingChanged {
		if r := w.ReplicaByID(id); r != nil {
			replica.SetPending(r, p.Pending[id], w.Now)
		}
	}
	return nil
}

// Join makes every launched machine's agent join, with its instance
// type's resources and its provider's runtimes.
func (w *World) Join() error {
	for _, m := range w.Snap.Machines {
		if m.JoinState != api.JoinBooting && m.JoinState != api.JoinProvisioning {
			continue
		}
		if err := fleet.Joined(m, w.AgentInventory(m), w.Now); err != nil {
			return err
		}
	}
	return nil
}

// AgentInventory is what a machine's agent reports as it joins: the
// resources it was launched with, its instance type's GPU devices and
// its provider's runtimes.
func (w *World) AgentInventory(m *api.Machine) api.Inventory {
	inv := api.Inventory{Capacity: m.Capacity, Runtimes: w.Snap.Providers[m.Provider].Runtimes, Zone: m.Zone}
	if it, ok := provisioner.FindInstanceType(w.Snap.Catalogs[m.Cluster].Catalog, m.InstanceType); ok {
		inv.GPUs = it.GPUDevices()
	}
	return inv
}

// Heartbeat makes every joined machine heartbeat now.
func (w *World) Heartbeat() {
	for _, m := range w.Snap.Machines {
		if m.JoinState == api.JoinJoined {
			fleet.Heartbeat(m, w.Now)
		}
	}
}

// Run makes every assigned replica's agent report it running and
// healthy (a moving replica's new copy takes over).
func (w *World) Run() error {
	for _, r := range w.Snap.Replicas {
		if r.Machine == "" || r.State == api.ReplicaRunning && r.PreviousMachine == "" {
			continue
		}
		if _, err := replica.Observe(r, api.ReplicaStatus{ReplicaID: r.ID, State: api.ReplicaRunning, Health: api.HealthHealthy}, "", w.Now); err != nil {
			return err
		}
	}
	return nil
}
