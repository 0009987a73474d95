package decidetest

import (
	"fmt"
	"slices"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/decide"
	"github.com/gantry-dev/gantry/fleet"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/replica"
	"github.com/gantry-dev/gantry/spec"
)

// Apply plays a plan back onto the snapshot as the act step and prompt,
// obliging providers would: intents get an instance at once, terminations
// finish at once, warm-pool machines stop and start.
func (h *Harness) Apply(p decide.Plan) {
	h.T.Helper()
	h.applyReplicas(p)
	for _, s := range p.Unreachable {
		fleet.MarkUnreachable(h.mustMachine(s.Machine), s.Reason, h.Now)
	}
	for _, a := range p.Adoptions {
		h.check(fleet.Launched(h.mustMachine(a.Machine), a.Instance, h.Now))
	}
	for _, d := range p.Drains {
		_, err := fleet.Drain(h.mustMachine(d.Machine), d.Reason, d.Deadline, h.Now)
		h.check(err)
	}
	for _, t := range p.Terminates {
		h.terminate(t)
	}
	for _, l := range p.Launches {
		h.launch(l)
	}
	for _, id := range p.LaunchCalls {
		m := h.mustMachine(id)
		h.check(fleet.Launched(m, provisioner.Instance{ID: "i-" + id}, h.Now))
	}
	for _, id := range p.TerminateCalls {
		h.check(fleet.SetFleetState(h.mustMachine(id), api.FleetTerminated, h.Now))
	}
	for _, s := range p.Stops {
		h.check(fleet.Stopped(h.mustMachine(s.Machine), h.Now))
	}
	for _, s := range p.Starts {
		h.check(fleet.Started(h.mustMachine(s.Machine), []string{"10.1.0.1"}, h.Now))
	}
	h.applyPlacements(p)
	h.Snap.Machines = slices.DeleteFunc(h.Snap.Machines, func(m *api.Machine) bool { return !m.Live() })
}

func (h *Harness) check(err error) {
	h.T.Helper()
	if err != nil {
		h.T.Fatal(err)
	}
}

func (h *Harness) mustMachine(id string) *api.Machine {
	h.T.Helper()
	m := h.MachineByID(id)
	if m == nil {
		h.T.Fatalf("the plan names machine %s, which the snapshot does not have", id)
	}
	return m
}

func (h *Harness) applyReplicas(p decide.Plan) {
	for _, r := range p.CreateReplicas {
		c := *r
		h.Snap.Replicas = append(h.Snap.Replicas, &c)
	}
	for _, rv := range p.Reverts {
		if svc := h.service(rv.Service); svc.Metadata.Generation == rv.Generation {
			svc.Spec = spec.WithTemplate(svc.Spec, rv.To.Spec)
			svc.Metadata.Generation++
		}
	}
	for _, d := range p.DeleteReplicas {
		h.Snap.Replicas = slices.DeleteFunc(h.Snap.Replicas, func(r *api.Replica) bool { return r.ID == d.ID })
	}
	for _, id := range p.EndMoves {
		for _, r := range h.Snap.Replicas {
			if r.ID == id && replica.Draining(r) {
				replica.EndMove(r)
			}
		}
	}
	for _, d := range p.RetireReplicas {
		for _, r := range h.Snap.Replicas {
			if r.ID == d.ID && r.RetiringSince == nil {
				now := h.Now
				r.RetiringSince, r.RetireReason = &now, d.Reason
			}
		}
	}
}

func (h *Harness) terminate(t decide.Terminate) {
	m := h.mustMachine(t.Machine)
	if changed, err := fleet.Terminating(m, t.Reason, h.Now); err != nil || !changed {
		h.check(err)
		return
	}
	for _, r := range h.Snap.Replicas {
		if r.PreviousMachine == m.ID {
			replica.EndMove(r)
		}
		if r.Machine == m.ID {
			replica.ToPending(r, "machine "+m.ID+" is terminating: "+t.Reason, h.Now)
		}
	}
}

// launch records an intent whose provider answers at once: the machine
// is booting.
func (h *Harness) launch(l decide.Launch) {
	h.seq++
	id := fmt.Sprintf("%s-%s-n%d", l.Cluster, l.Group, h.seq)
	var labels map[string]string
	template := ""
	if cl := h.Snap.Clusters[l.Cluster]; cl != nil {
		g, _ := cl.Group(l.Group)
		labels, template = g.Labels, spec.TemplateHash(cl, l.Group)
	}
	m := &api.Machine{ID: id, Cluster: l.Cluster, Group: l.Group, InstanceType: l.InstanceType, Zone: l.Zone, CapacityType: l.CapacityType,
		PricePerHour: l.PricePerHour, Provider: h.Snap.Clusters[l.Cluster].Spec.Provider.Name, ProviderKey: l.ProviderKey,
		LaunchKey: "lk-" + id, Subnet: fmt.Sprintf("10.245.%d.0/24", h.seq), TemplateHash: template, Labels: labels, Capacity: l.Capacity,
		JoinState: api.JoinProvisioning, FleetState: api.FleetReady, CreatedAt: h.Now, StateChangedAt: h.Now}
	h.check(fleet.Launched(m, provisioner.Instance{ID: "i-" + id, Addresses: []string{fmt.Sprintf("10.2.0.%d", h.seq)}}, h.Now))
	h.Snap.Machines = append(h.Snap.Machines, m)
}

func (h *Harness) applyPlacements(p decide.Plan) {
	for _, e := range p.Evictions {
		if r := h.ReplicaByID(e.Replica); r != nil && r.Machine == e.Machine {
			replica.ToPending(r, "preempted by "+e.By, h.Now)
		}
	}
	for _, a := range p.Assignments {
		r := h.ReplicaByID(a.Replica)
		if r == nil {
			h.T.Fatalf("assignment of unknown replica %s", a.Replica)
		}
		h.check(replica.Assign(r, a.Placement, a.Moving(), h.Now))
	}
	for id, why := range p.Pending {
		if r := h.ReplicaByID(id); r != nil {
			replica.SetPending(r, why, h.Now)
		}
	}
}
