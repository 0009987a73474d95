package machines

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/decide"
	"github.com/gantry-dev/gantry/fleet"
	"github.com/gantry-dev/gantry/provisioner"
)

// Fence stops a failed primary's machine through its provider and asks
// the provider whether it is stopped; the outcome tells the next pass
// whether the failover may promote. Terminating an instance twice is
// harmless, so a machine already terminating is simply confirmed. A
// machine whose instance id is not known yet is looked up by its tags
// first: a fence is confirmed only by a provider's answer.
func (c *Calls) Fence(f decide.Fence, key string) {
	c.start(decide.CallFence, f.Machine, key, func(ctx context.Context) {
		m, _, prov, err := c.machine(f.Machine)
		if err != nil {
			c.Log.Warn("fence", "machine", f.Machine, "group", f.Group, "err", err)
			return
		}
		var ids []string
		if ids, err = c.instancesOf(ctx, m, prov); err == nil {
			for _, id := range ids {
				if err = confirmStopped(ctx, prov, id); err != nil {
					break
				}
			}
		}
		if err != nil && termEnded(ctx) {
			return
		}
		if err != nil {
			c.Log.Warn("fence not confirmed; will retry", "machine", m.ID, "group", f.Group, "err", err)
		}
		c.recordOutcome(c.outcome(decide.CallFence, m, err))
	})
}

// instancesOf is the instance of m: its ProviderID, or, when the launch's
// answer never arrived, the live instances tagged with m's id (found one
// becomes m's ProviderID). None found is the provider's answer that m has
// no instance.
func (c *Calls) instancesOf(ctx context.Context, m *api.Machine, prov provisioner.Provisioner) ([]string, error) {
	if m.ProviderID != "" {
		return []string{m.ProviderID}, nil
	}
	found, err := prov.List(ctx, provisioner.Filter{Tags: map[string]string{
		provisioner.TagManagedBy: provisioner.ManagedByValue, provisioner.TagInstallation: c.cfg.InstallationID, provisioner.TagMachine: m.ID,
	}})
	if err != nil {
		return nil, fmt.Errorf("find the instance of machine %s by its tags: %w", m.ID, err)
	}
	var ids []string
	for _, inst := range found {
		if inst.State != provisioner.StateTerminated {
			ids = append(ids, inst.ID)
		}
	}
	if len(ids) == 1 {
		now := c.Clock.Now()
		inst := found[slices.IndexFunc(found, func(i provisioner.Instance) bool { return i.ID == ids[0] })]
		c.update(m.ID, func(m *api.Machine) error { return fleet.Launched(m, inst, now) }, nil, api.EventNormal, "InstanceFound",
			"instance %s found by its tags (the agent reported %s)", inst.ID, cmp.Or(m.ReportedInstance, "(none)"))
	}
	return ids, nil
}

func confirmStopped(ctx context.Context, prov provisioner.Provisioner, instance string) error {
	return confirmGone(ctx, prov, instance, true)
}

// errNotGoneYet: the provider took the terminate call, and the instance is
// still shutting down.
var errNotGoneYet = errors.New("not gone yet")

// confirmGone terminates an instance and confirms the provider has it
// terminated (or stopped, when that is enough) or knows it no more.
func confirmGone(ctx context.Context, prov provisioner.Provisioner, instance string, stoppedIsEnough bool) error {
	if err := prov.Terminate(ctx, instance); err != nil && !errors.Is(err, provisioner.ErrNotFound) {
		return fmt.Errorf("terminate %s: %w", instance, err)
	}
	inst, err := prov.Describe(ctx, instance)
	switch {
	case errors.Is(err, provisioner.ErrNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("describe %s: %w", instance, err)
	case inst.State == provisioner.StateTerminated || stoppedIsEnough && inst.State == provisioner.StateStopped:
		return nil
	}
	return fmt.Errorf("instance %s is still %s: %w", instance, inst.State, errNotGoneYet)
}
