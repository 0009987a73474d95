package controller

import (
	"context"
	"fmt"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/fleet"
	"github.com/gantry-dev/gantry/planner"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/spec"
	"github.com/gantry-dev/gantry/store"
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

// rollout replaces machines launched with an old template, a few at a
// time (rollout.maxSurge): a replacement joins first, then one outdated
// machine drains — its replicas move, new copy first — and goes. All of it
// is derived from the store, so a restarted server resumes where it was.
func (c *Controller) rollout(ctx context.Context, snap *snapshot, now time.Time) {
	busy := map[string]bool{}
	for _, r := range snap.replicas {
		busy[r.Machine] = true
	}
	for name, cl := range snap.clusters {
		_, prov, err := c.providers.For(cl.Spec.Provider)
		if err != nil {
			continue
		}
		for _, g := range cl.Spec.CapacityGroups {
			key := planner.Key(name, g.GroupID)
			current := spec.TemplateHash(cl, g.GroupID)
			gr := tally(snap, name, g.GroupID, current, busy)
			for _, m := range gr.stoppedOutdated {
				_ = c.fleet.Terminate(ctx, m.ID, fleet.CauseRollout, "rollout: stopped warm-pool machine with template "+m.TemplateHash)
			}
			if len(gr.outdated) == 0 {
				c.rolloutDone(ctx, key, name)
				continue
			}
			c.rolloutStarted(ctx, key, name, len(gr.outdated))
			surge := cl.Spec.Rollout.MaxSurge
			for gr.spare > 0 && gr.draining < surge && len(gr.outdated) > 0 {
				m := gr.outdated[0]
				gr.outdated, gr.spare, gr.draining = gr.outdated[1:], gr.spare-1, gr.draining+1
				c.drain(ctx, m.ID, "rollout: template "+m.TemplateHash+" → "+current, now)
			}
			for gr.launched+gr.draining < surge && gr.launched < len(gr.outdated) && gr.live < g.MaxSize+surge {
				m := gr.outdated[gr.launched]
				it, _ := provisioner.FindInstanceType(prov.InstanceTypes(), m.InstanceType)
				offering := provisioner.Offering{Zone: m.Zone, CapacityType: m.CapacityType, PricePerHour: m.PricePerHour}
				if err := c.fleet.Launch(ctx, cl, g, it, offering, fmt.Sprintf("rollout: replaces %s (template %s → %s)", m.ID, m.TemplateHash, current)); err != nil {
					c.log.Warn("rollout launch", "group", key, "err", err)
					break
				}
				gr.launched++
				gr.live++
			}
		}
	}
}

func tally(snap *snapshot, cluster, group, current string, busy map[string]bool) groupRollout {
	var gr groupRollout
	for _, m := range snap.machines {
		if m.Cluster != cluster || m.Group != group || !m.Live() || m.FleetState == api.FleetTerminating || m.UnreachableSince != nil {
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
		case m.JoinState != api.JoinJoined:
			gr.launched++
		case !busy[m.ID] && m.FleetState != api.FleetDraining:
			gr.spare++
		}
	}
	return gr
}

func (c *Controller) rolloutStarted(ctx context.Context, key, cluster string, outdated int) {
	c.mu.Lock()
	started := !c.rolling[key]
	c.rolling[key] = true
	c.mu.Unlock()
	if started {
		c.event(ctx, api.EventNormal, "RolloutStarted", cluster, fmt.Sprintf("group %s: %d machine(s) run an old template", key, outdated))
	}
}

func (c *Controller) rolloutDone(ctx context.Context, key, cluster string) {
	c.mu.Lock()
	was := c.rolling[key]
	delete(c.rolling, key)
	c.mu.Unlock()
	if was {
		c.event(ctx, api.EventNormal, "RolloutComplete", cluster, "group "+key+": every machine runs the current template")
	}
}

func (c *Controller) event(ctx context.Context, typ, reason, cluster, msg string) {
	_ = c.store.Update(ctx, func(tx store.Tx) error {
		return store.Record(tx, typ, reason, api.KindCluster, cluster, "%s", msg)
	})
}
