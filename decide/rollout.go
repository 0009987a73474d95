package decide

import (
	"fmt"
	"sync"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/planner"
	"github.com/gantry-dev/gantry/spec"
)

// groupRollout is one group's machines by template.
type groupRollout struct {
	outdated           []*api.Machine
	draining, launched int // outdated machines draining; new ones not joined yet
	spare              int // new machines joined and still empty
	live               int
	// stoppedOutdated warm-pool machines are simply replaced.
	stoppedOutdated []*api.Machine
}

// rollouts replace machines launched with an old template, a few at a
// time (rollout.maxSurge): a replacement joins first, then one outdated
// machine drains — its replicas move, new copy first — and goes. Progress
// is the machines' own template hashes, so another server resumes it;
// memory keeps only when it began, for its events. Machines joined by
// hand are not Gantry's to replace.
func (p *Pass) rollouts(clusters []string) {
	busy := sync.OnceValue(func() map[string]bool { // machines running a replica, once a rollout needs them
		out := make(map[string]bool, len(p.machines))
		for _, r := range p.replicas {
			out[r.Machine] = true
		}
		return out
	})
	for _, name := range clusters {
		cl := p.snap.Clusters[name]
		if p.snap.Catalogs[name].Err != "" {
			continue
		}
		for _, g := range cl.Spec.CapacityGroups {
			p.rollOutGroup(cl, g, busy)
		}
	}
}

func (p *Pass) rollOutGroup(cl *api.Cluster, g api.CapacityGroup, busy func() map[string]bool) {
	name, key := cl.Metadata.Name, planner.Key(cl.Metadata.Name, g.GroupID)
	current := spec.TemplateHash(cl, g.GroupID)
	gr := p.tally(name, g.GroupID, current, busy)
	for _, m := range gr.stoppedOutdated {
		p.terminate(m, CauseRollout, "rollout: stopped warm-pool machine with template "+m.TemplateHash, false)
	}
	if len(gr.outdated) == 0 {
		if _, was := p.mem.Rollouts[key]; was {
			delete(p.mem.Rollouts, key)
			p.event(api.EventNormal, "RolloutComplete", api.KindCluster, name, "group "+key+": every machine runs the current template")
		}
		return
	}
	if r, was := p.mem.Rollouts[key]; !was || r.Template != current {
		p.mem.Rollouts[key] = Rollout{Since: p.now, Template: current}
		p.event(api.EventNormal, "RolloutStarted", api.KindCluster, name, fmt.Sprintf("group %s: %d machine(s) run an old template", key, len(gr.outdated)))
	}
	surge := cl.Spec.Rollout.MaxSurge
	for gr.spare > 0 && gr.draining < surge && len(gr.outdated) > 0 {
		m := gr.outdated[0]
		gr.outdated, gr.spare, gr.draining = gr.outdated[1:], gr.spare-1, gr.draining+1
		p.drain(m, "rollout: template "+m.TemplateHash+" → "+current)
	}
	if _, blocked := p.launchBlocked(name, g.GroupID); blocked {
		return
	}
	for gr.launched+gr.draining < surge && gr.launched < len(gr.outdated) && gr.live < g.MaxSize+surge {
		m := gr.outdated[gr.launched]
		p.launch(Launch{Key: fmt.Sprintf("rollout-%d", len(p.plan.Launches)+1), Cluster: name, Group: g.GroupID,
			InstanceType: m.InstanceType, Zone: m.Zone, CapacityType: m.CapacityType, PricePerHour: m.PricePerHour,
			Reason: fmt.Sprintf("rollout: replaces %s (template %s → %s)", m.ID, m.TemplateHash, current)}, current)
		gr.launched++
		gr.live++
	}
}

// tally counts a group's machines by template; the spare ones (current,
// joined, empty) only when some are outdated: finding which machines run
// a replica walks every replica.
func (p *Pass) tally(cluster, group, current string, busy func() map[string]bool) groupRollout {
	provisions := runMemo(func(provider string) bool { return p.snap.Providers[provider].Provisions })
	if c := p.counts(); c != nil {
		if gr, ok := c.rollout(cluster, group, current, provisions); ok {
			return gr
		}
	}
	return p.tallyByWalk(cluster, group, current, busy, provisions)
}

// tallyByWalk is tally from every machine.
func (p *Pass) tallyByWalk(cluster, group, current string, busy func() map[string]bool, provisions func(string) bool) groupRollout {
	var gr groupRollout
	inGroup := func(m *api.Machine) bool {
		return m.Cluster == cluster && m.Group == group && m.CountsTowardGroup() && provisions(m.Provider)
	}
	for _, m := range p.machines {
		if !inGroup(m) {
			continue
		}
		gr.live++
		switch {
		case m.FleetState == api.FleetStopped:
			if m.TemplateHash != current {
				gr.stoppedOutdated = append(gr.stoppedOutdated, m)
			}
		case m.TemplateHash != current && m.FleetState == api.FleetDraining:
			gr.draining++
		case m.TemplateHash != current:
			gr.outdated = append(gr.outdated, m)
		}
	}
	if len(gr.outdated) == 0 {
		return gr
	}
	for _, m := range p.machines { // only a rollout needs the spare ones (no list of 50,000 every pass)
		if inGroup(m) && m.FleetState != api.FleetStopped && m.TemplateHash == current {
			switch {
			case m.JoinState != api.JoinJoined:
				gr.launched++
			case m.FleetState != api.FleetDraining && !busy()[m.ID]:
				gr.spare++
			}
		}
	}
	return gr
}
