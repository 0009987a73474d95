package decide

import (
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/failover"
	"github.com/gantry-dev/gantry/spec"
)

// FailoverKey is where a group's state is kept.
func FailoverKey(group string) string { return "failover/" + group }

// FailoverRequestKey is where the API leaves a manual step for a group.
func FailoverRequestKey(group string) string { return "failoverrequest/" + group }

// Fence asks the act step to stop a machine through its provider and
// confirm with Describe that it is stopped, for a failover group.
type Fence struct {
	Group   string
	Machine string
}

// Instance is how a failover side names what runs it: the replica and
// its machine (a replica placed again elsewhere is a new instance).
func Instance(r *api.Replica) string {
	if r == nil || r.Machine == "" {
		return ""
	}
	return r.ID + "@" + r.Machine
}

// InstanceMachine is the machine of an Instance; InstanceReplica its
// replica.
func InstanceMachine(instance string) string {
	_, m, _ := strings.Cut(instance, "@")
	return m
}

// InstanceReplica is the replica of an Instance.
func InstanceReplica(instance string) string {
	r, _, _ := strings.Cut(instance, "@")
	return r
}

// SideReplica is the replica that runs a failover side: of its service's
// replicas (one, or two while it is replaced), the placed one.
func SideReplica(replicas []*api.Replica) *api.Replica {
	var out *api.Replica
	for _, r := range replicas {
		if out == nil || out.Machine == "" && r.Machine != "" {
			out = r
		}
	}
	return out
}

// decideFailover steps every failover group through its state machine
// (package failover), with its sides as this pass sees them.
func (p *Pass) decideFailover() {
	groups := append([]*api.FailoverGroup(nil), p.snap.FailoverGroups...)
	sort.Slice(groups, func(i, j int) bool { return groups[i].Metadata.Name < groups[j].Metadata.Name })
	live := map[string]bool{}
	for _, g := range groups {
		name := g.Metadata.Name
		live[name] = true
		st, ok := p.mem.Failover[name]
		if !ok {
			st = failover.New(p.now)
			p.event(api.EventNormal, "Created", api.KindFailoverGroup, name, "primary in cluster "+g.Spec.Primary.Cluster+", replica in cluster "+g.Spec.Replica.Cluster)
		}
		sides := p.failoverSides(g, &st)
		request := p.mem.FailoverRequests[name]
		delete(p.mem.FailoverRequests, name)
		group := failover.Group{Name: name, Sides: map[string]string{failover.HomePrimary: "cluster " + g.Spec.Primary.Cluster, failover.HomeReplica: "cluster " + g.Spec.Replica.Cluster}, Automatic: g.Spec.Mode == api.FailoverAutomatic,
			Lease: time.Duration(g.Spec.LeaseSeconds) * time.Second, FenceMargin: time.Duration(g.Spec.FenceMarginSeconds) * time.Second, Data: DataRule(g.Spec.Capability)}
		d := failover.Step(group, st, sides, request, p.now)
		if !d.Wake.IsZero() {
			p.plan.Wake.at(d.Wake)
		}
		for _, e := range d.Events {
			typ := api.EventNormal
			if e.Warning {
				typ = api.EventWarning
			}
			p.event(typ, e.Reason, api.KindFailoverGroup, name, e.Message)
		}
		next := d.State
		for _, a := range d.Actions {
			p.fenceSide(g, &next, sides[a.Fence])
		}
		p.mem.Failover[name] = next
	}
	keepKeys(p.mem.Failover, func(k string) bool { return live[k] })
	keepKeys(p.mem.FailoverRequests, func(k string) bool { return live[k] })
}

// DataRule is the rule that keeps a capability's automatic failovers
// from losing acknowledged writes (the postgres capability reports its
// replication; others do not, and promote as before).
func DataRule(c api.FailoverCapability) failover.DataRule {
	if c.Name != api.CapabilityPostgres || c.Postgres == nil {
		return failover.DataRule{}
	}
	lag := c.Postgres.MaximumLagBytes
	if lag <= 0 {
		lag = api.DefaultMaximumLagBytes
	}
	return failover.DataRule{Enforced: true, Synchronous: c.Postgres.Synchronous, MaximumLag: uint64(lag)}
}

// failoverSides are a group's two sides as machine sides.
func (p *Pass) failoverSides(g *api.FailoverGroup, st *failover.State) map[string]*machineSide {
	sides := map[string]*machineSide{}
	for home, cluster := range map[string]string{failover.HomePrimary: g.Spec.Primary.Cluster, failover.HomeReplica: g.Spec.Replica.Cluster} {
		service := spec.FailoverMemberName(g.Metadata.Name, cluster)
		s := &machineSide{p: p, st: st, lease: time.Duration(g.Spec.LeaseSeconds) * time.Second}
		var ofService []*api.Replica
		for _, r := range p.replicas {
			if r.Service == service {
				ofService = append(ofService, r)
			}
		}
		if s.r = SideReplica(ofService); s.r != nil {
			s.m = p.machine(s.r.Machine)
		}
		sides[home] = s
	}
	p.renewLease(st, sides[st.Primary])
	return sides
}

// renewLease keeps when the holder's lease was last renewed: its
// machine's last heartbeat, but never before this server recorded
// heartbeats reliably (a new leader gives a full lease). Once the server
// has taken the role back (fencing, switching over), heartbeats renew
// nothing: the holder is told it is fenced, and a machine that keeps
// heartbeating must not hold the lease forever.
func (p *Pass) renewLease(st *failover.State, primary *machineSide) {
	if st.Phase == failover.PhaseFencing || st.Phase == failover.PhaseSwitchover {
		return
	}
	i, ok := findByID(p.machines, p.sortedMachines, InstanceMachine(st.Holder), apiMachineID)
	if !ok || !p.machines[i].Live() {
		return // it renews nothing more; the last known renewal stands
	}
	m := p.machines[i]
	p.readHeartbeat(i, m)
	if renewed := lastSign(p.snap.heartbeat(i, m), p.snap.LivenessSince); renewed.After(st.Renewed) {
		st.Renewed = renewed
	}
}

// fenceSide stops the machine of a failed primary: it is terminated
// (its replicas move, the group replaces it) and the act step confirms
// through Describe that the provider stopped it.
func (p *Pass) fenceSide(g *api.FailoverGroup, st *failover.State, s *machineSide) {
	machine := InstanceMachine(st.Holder)
	if machine == "" {
		return
	}
	st.FenceMachine = machine
	if m := p.machine(machine); m != nil && m.Live() {
		p.terminate(m, CauseFenced, "fenced: failover group "+g.Metadata.Name+" promotes its replica", false)
	}
	if p.inFlight(CallFence, machine) || st.FenceTried != nil && !p.reached(st.FenceTried.Add(p.cfg.DescribeInterval)) {
		return
	}
	now := p.now
	st.FenceTried = &now
	p.plan.Fences = append(p.plan.Fences, Fence{Group: g.Metadata.Name, Machine: machine})
}

// fenceOutcome folds a fence call's outcome into its group.
func (p *Pass) fenceOutcome(o Outcome) {
	for name, st := range p.mem.Failover {
		if st.FenceMachine != o.Machine || st.Phase != failover.PhaseFencing {
			continue
		}
		if o.Failed() {
			st.FenceError = o.Error
		} else if !st.FenceConfirmed {
			st.FenceConfirmed, st.FenceError = true, ""
			p.event(api.EventNormal, "Fenced", api.KindFailoverGroup, name, "the provider confirms machine "+o.Machine+" of the old primary is stopped")
		}
		p.mem.Failover[name] = st
	}
}

// machineSide is a failover side on a machine cluster.
type machineSide struct {
	p     *Pass
	st    *failover.State
	r     *api.Replica
	m     *api.Machine
	lease time.Duration
}

func (s *machineSide) Instance() string { return Instance(s.r) }

func (s *machineSide) reachable() bool {
	return s.m != nil && s.m.Live() && s.m.UnreachableSince == nil && s.m.FleetState != api.FleetTerminating
}

func (s *machineSide) Healthy(role string, epoch int64) bool {
	r := s.r
	return r != nil && s.reachable() && r.State == api.ReplicaRunning && r.Health == api.HealthHealthy &&
		r.Member != nil && r.Member.Role == role && r.Member.Epoch == epoch && r.Member.Serving
}

func (s *machineSide) Failed() bool {
	r := s.r
	if r == nil || !s.reachable() {
		return true
	}
	if Instance(r) == s.st.Holder && s.p.reached(s.LeaseExpiry()) {
		return true
	}
	return r.State == api.ReplicaCrashed || r.State == api.ReplicaFailed || r.State == api.ReplicaPending || r.Health == api.HealthUnhealthy
}

func (s *machineSide) Stopped(epoch int64) bool {
	r := s.r
	return r != nil && r.Member != nil && r.Member.Role == api.RoleFenced && !r.Member.Serving && r.Member.Epoch == epoch
}

func (s *machineSide) LeaseExpiry() time.Time { return s.st.Renewed.Add(s.lease) }

func (s *machineSide) Replication() *api.ReplicationStatus {
	if s.r == nil || s.r.Member == nil {
		return nil
	}
	return s.r.Member.Replication
}

func (s *machineSide) Fence() failover.FenceState {
	m := s.p.machine(InstanceMachine(s.st.Holder))
	switch {
	case s.st.FenceConfirmed:
		return failover.FenceConfirmed
	case m != nil && !s.p.provisions(m):
		return failover.FenceUnsupported // joined by hand: nothing can stop it
	case s.st.FenceMachine == "":
		return failover.FenceNotRequested
	}
	return failover.FencePending
}

// Endpoint is where a replica serves its named port (host:port).
func Endpoint(r *api.Replica, port string) string {
	if r == nil || r.Address == "" || r.HostPorts[port] == 0 {
		return ""
	}
	return r.Address + ":" + strconv.Itoa(r.HostPorts[port])
}
