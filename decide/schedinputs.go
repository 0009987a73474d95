package decide

import (
	"net/netip"
	"slices"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/runtime"
	"github.com/gantry-dev/gantry/scheduler"
	"github.com/gantry-dev/gantry/spec"
)

// runtimeFor is the runtime a service needs: containers for an image,
// processes for a command.
func runtimeFor(s api.ServiceSpec) string {
	if s.Image != "" {
		return scheduler.RuntimeDocker
	}
	return scheduler.RuntimeProcess
}

func toSchedReplica(r *api.Replica, svc *api.Service, sp api.ServiceSpec, zones []string) scheduler.Replica {
	pl := sp.Placement
	req := r.Requests
	req.GPUs = 0 // GPUs are matched by device, from GPU below
	sr := scheduler.Replica{ID: r.ID, Index: r.Index, Requests: req, Rules: &scheduler.Rules{
		Service: r.Service, Cluster: r.Cluster,
		Runtime: runtimeFor(sp), Isolation: sp.Isolation, Groups: pl.CapacityGroups, NodeSelector: pl.NodeSelector,
		Dedicated: pl.Dedicated, SameZone: pl.SameZone, Priority: pl.Priority, Scoring: pl.Scoring, Spread: pl.Spread, ZoneDomains: zones,
		Preempt: pl.PreemptLowerPriority, Labels: svc.Metadata.Labels,
	}}
	if len(pl.Affinity)+len(pl.AntiAffinity) > 0 {
		sr.Terms = &scheduler.Terms{Affinity: pl.Affinity, AntiAffinity: pl.AntiAffinity}
	}
	if g := sp.Resources.GPU; g != nil {
		sr.GPU = &scheduler.GPUNeed{Count: g.Count, Type: g.Type, MinVRAMGB: g.MinVRAMGB, Preferred: g.Policy == api.GPUPreferred}
	}
	return sr
}

// schedReplicas builds the scheduler's replicas of a list that comes by
// service: what the service's revision decides (rules, runtime, GPU,
// labels) is built once per run of replicas of one service, revision and
// cluster, not once per replica (500,000 times a pass at 50,000 machines).
type schedReplicas struct {
	p     *Pass
	zones map[string][]string
	last  *api.Replica
	svc   *api.Service
	built scheduler.Replica
	// runs are the rules built, by run: the replicas of one run share
	// them, however they come (a machine's residents come a run each).
	runs map[builtRun]scheduler.Replica
}

type builtRun struct {
	run
	svc *api.Service
}

func (b *schedReplicas) of(r *api.Replica, svc *api.Service) scheduler.Replica {
	b.rulesOf(r, svc)
	sr := b.built
	req := r.Requests
	req.GPUs = 0
	sr.ID, sr.Index, sr.Requests = r.ID, r.Index, req
	return sr
}

// rulesOf are the rules of r's run.
func (b *schedReplicas) rulesOf(r *api.Replica, svc *api.Service) *scheduler.Rules {
	if b.last != nil && b.svc == svc && b.last.Service == r.Service && b.last.SpecHash == r.SpecHash && b.last.Cluster == r.Cluster {
		return b.built.Rules
	}
	k := builtRun{run{service: r.Service, hash: r.SpecHash, cluster: r.Cluster}, svc}
	built, ok := b.runs[k]
	if !ok {
		built = toSchedReplica(r, svc, b.p.specOf(r, svc), b.zones[r.Cluster])
		if b.runs == nil {
			b.runs = map[builtRun]scheduler.Replica{}
		}
		b.runs[k] = built
	}
	b.built, b.last, b.svc = built, r, svc
	return b.built.Rules
}

// specOf is what a replica runs: its revision's spec (the service's
// current one when the revision is gone from memory).
func (p *Pass) specOf(r *api.Replica, svc *api.Service) api.ServiceSpec {
	if rev, ok := p.mem.Revisions[RevisionKey(r.Service, r.SpecHash)]; ok {
		return rev.Spec
	}
	return svc.Spec
}

// schedulerMachine is a machine as the scheduler sees it, before its
// replicas are booked, but for its count of services: a value, which the
// booking compares with the machine it kept and allocates only when they
// differ (bookable).
func (p *Pass) schedulerMachine(m *api.Machine, cl *api.Cluster) scheduler.Machine {
	sm := scheduler.Machine{
		ID: m.ID, Cluster: m.Cluster, Group: m.Group, Zone: m.Zone, CapacityType: m.CapacityType, Labels: m.Labels,
		Runtimes: m.Runtimes, PricePerHour: m.PricePerHour,
		Allocatable: api.Allocatable(m.Capacity, spec.Reserved(cl.Spec.SystemReserved)),
	}
	switch provided := p.snap.Providers[m.Provider].Runtimes; {
	case m.JoinState != api.JoinJoined:
		sm.Runtimes = provided
	case slices.Equal(m.Runtimes, provided):
		// One list for the provider's machines, not each machine's own:
		// every scheduling session reads it for each machine (a cache
		// miss each at 10,000 machines).
		sm.Runtimes = provided
	}
	sm.TEE = slices.ContainsFunc(sm.Runtimes, runtime.IsTEE)
	devices := m.GPUs
	if m.JoinState != api.JoinJoined && len(devices) == 0 && m.Capacity.GPUs > 0 {
		devices = p.typesGPUs(m)
	}
	for _, g := range devices {
		sm.GPUs = append(sm.GPUs, scheduler.GPU{Index: g.Index, Type: g.Type, VRAMGB: g.VRAMGB})
	}
	return sm
}

// typesGPUs are the GPU devices a machine on its way will have, as its
// instance type lists them: until it joins and reports its own, a GPU
// replica waits for it instead of wanting another machine (each pass
// launched one more).
func (p *Pass) typesGPUs(m *api.Machine) []api.GPUDevice {
	it, ok := provisioner.FindInstanceType(p.snap.Catalogs[m.Cluster].Catalog, m.InstanceType)
	if !ok {
		return nil
	}
	return it.GPUDevices()
}

// replicaAddress is where a replica placed on m answers: an address of
// its own in m's /24 on an overlay, m's first address elsewhere.
func (p *Pass) replicaAddress(m *api.Machine) string {
	if cl := p.snap.Clusters[m.Cluster]; cl != nil && cl.OwnAddresses() && m.Subnet != "" {
		return p.overlayAddress(m)
	}
	if len(m.Addresses) > 0 {
		return m.Addresses[0]
	}
	return ""
}

// overlayAddress is a replica's own address on an overlay machine: the
// first of its /24 after the machine's own (the first) that no replica
// of the machine holds — copies moving off it and retiring ones
// included; the machine's when the /24 is full.
func (p *Pass) overlayAddress(m *api.Machine) string {
	subnet, err := netip.ParsePrefix(m.Subnet)
	if err != nil {
		return api.MeshAddress(m.Subnet)
	}
	held := map[string]bool{api.MeshAddress(m.Subnet): true}
	for _, r := range append(slices.Clip(p.replicas), p.retiring...) {
		if r.Machine == m.ID {
			held[r.Address] = true
		}
		if r.PreviousMachine == m.ID {
			held[r.PreviousAddress] = true
		}
	}
	for a := subnet.Masked().Addr().Next(); subnet.Contains(a.Next()); a = a.Next() {
		if !held[a.String()] {
			return a.String()
		}
	}
	return api.MeshAddress(m.Subnet)
}

// inOverlay: a machine of an overlay or routed cluster takes replicas
// only once its network is up (its NetworkReady is True); others always.
func inOverlay(m *api.Machine, cl *api.Cluster) bool {
	if !cl.OwnAddresses() {
		return true
	}
	for _, c := range m.Conditions {
		if c.Type == api.ConditionNetworkReady {
			return c.Status == "True"
		}
	}
	return false
}
