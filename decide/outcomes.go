package decide

import (
	"fmt"
	"sort"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/planner"
	"github.com/gantry-dev/gantry/provisioner"
)

// foldOutcomes learns from the provider calls made since the last pass:
// a launch that ran out of capacity makes its offering unavailable for a
// while; other failed launches back their group off, and refused
// credentials turn the cluster's ProviderReady condition false; a
// successful launch clears both. A failed terminate is retried with
// backoff; a warm-pool machine that would not start is replaced.
func (p *Pass) foldOutcomes() {
	ids := make([]string, 0, len(p.mem.Outcomes))
	for id := range p.mem.Outcomes {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool {
		a, b := p.mem.Outcomes[ids[i]], p.mem.Outcomes[ids[j]]
		if !a.At.Equal(b.At) {
			return a.At.Before(b.At)
		}
		return ids[i] < ids[j]
	})
	for _, id := range ids {
		o := p.mem.Outcomes[id]
		delete(p.mem.Outcomes, id)
		switch o.Call {
		case CallLaunch:
			p.launchOutcome(o)
		case CallTerminate:
			p.terminateOutcome(o)
		case CallFence:
			p.fenceOutcome(o)
		case CallStart:
			if m := p.machine(o.Machine); o.Failed() && m != nil && m.FleetState == api.FleetStopped {
				p.terminate(m, CauseStartFailed, "warm-pool machine did not start: "+o.Error, false)
			}
		}
	}
}

func (p *Pass) launchOutcome(o Outcome) {
	key := planner.Key(o.Cluster, o.Group)
	switch {
	case !o.Failed():
		delete(p.mem.Backoff, key)
		p.setProviderReady(o.Cluster, true, "", o)
	case o.Kind == provisioner.KindInsufficientCapacity:
		p.mem.Unavailable[planner.OfferingKey(o.InstanceType, o.Zone, o.CapacityType)] = o.At.Add(p.cfg.UnavailableTTL)
	default:
		b := p.mem.Backoff[key]
		b.Until = o.At.Add(backoff(p.cfg.LaunchBackoff, p.cfg.MaxLaunchBackoff, b.Failures))
		b.Failures++
		p.mem.Backoff[key] = b
		if o.Kind == provisioner.KindAuth {
			p.setProviderReady(o.Cluster, false, o.Error, o)
		}
	}
}

// setProviderReady records whether the cluster's provider accepts
// Gantry's credentials, with an event when that changes.
func (p *Pass) setProviderReady(cluster string, ready bool, message string, o Outcome) {
	status, reason := "True", ""
	if !ready {
		status, reason = "False", "AuthFailed"
	}
	key := ConditionKey(cluster, api.ConditionProviderReady)
	prev, had := p.mem.Conditions[key]
	if had && prev.Status == status {
		return
	}
	p.mem.Conditions[key] = api.Condition{Type: api.ConditionProviderReady, Status: status, Reason: reason, Message: message, LastTransitionTime: o.At.UTC()}
	switch {
	case !ready:
		p.event(api.EventWarning, api.ConditionProviderReady, api.KindCluster, cluster, "provider refuses the credentials: "+message)
	case had:
		p.event(api.EventNormal, api.ConditionProviderReady, api.KindCluster, cluster, "provider accepts the credentials again")
	}
}

func (p *Pass) terminateOutcome(o Outcome) {
	m := p.machine(o.Machine)
	if !o.Failed() || m == nil || m.FleetState != api.FleetTerminating {
		return
	}
	r := p.mem.Terminations[m.ID]
	r.Next = o.At.Add(backoff(p.cfg.TerminateBackoff, p.cfg.MaxTerminateBackoff, r.Attempts))
	r.Attempts++
	if !r.Reported && p.now.Sub(m.StateChangedAt) > p.cfg.StuckAfter {
		r.Reported = true
		p.event(api.EventWarning, "TerminateStuck", "Machine", m.ID,
			fmt.Sprintf("still terminating after %s and %d attempts: %s", p.cfg.StuckAfter, r.Attempts, o.Error))
	}
	p.mem.Terminations[m.ID] = r
}

// launchBlocked says why launches in a group wait, if they do.
func (p *Pass) launchBlocked(cluster, group string) (string, bool) {
	b, ok := p.mem.Backoff[planner.Key(cluster, group)]
	if !ok || p.reached(b.Until) {
		return "", false
	}
	return fmt.Sprintf("launches in group %s/%s back off until %s after %d failure(s)", cluster, group, b.Until.Format("15:04:05"), b.Failures), true
}
