package controller

import (
	"context"
	"errors"
	"fmt"

	"github.com/gantry-dev/gantry/decide"
	"github.com/gantry-dev/gantry/provisioner"
)

// fence stops a failed primary's machine through its provider and asks
// the provider whether it is stopped; the outcome tells the next pass
// whether the failover may promote. Terminating an instance twice is
// harmless, so a machine already terminating is simply confirmed.
func (c *calls) fence(f decide.Fence, key string) {
	c.start(decide.CallFence, f.Machine, key, func(ctx context.Context) {
		m, _, prov, err := c.machine(f.Machine)
		if err != nil {
			c.Log.Warn("fence", "machine", f.Machine, "group", f.Group, "err", err)
			return
		}
		if m.ProviderID != "" {
			err = confirmStopped(ctx, prov, m.ProviderID)
		}
		if err != nil {
			c.Log.Warn("fence not confirmed; will retry", "machine", m.ID, "group", f.Group, "err", err)
		}
		c.recordOutcome(c.outcome(decide.CallFence, m, err))
	})
}

func confirmStopped(ctx context.Context, prov provisioner.Provisioner, instance string) error {
	if err := prov.Terminate(ctx, instance); err != nil && !errors.Is(err, provisioner.ErrNotFound) {
		return fmt.Errorf("terminate %s: %w", instance, err)
	}
	inst, err := prov.Describe(ctx, instance)
	switch {
	case errors.Is(err, provisioner.ErrNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("describe %s: %w", instance, err)
	case inst.State == provisioner.StateTerminated || inst.State == provisioner.StateStopped:
		return nil
	}
	return fmt.Errorf("instance %s is still %s", instance, inst.State)
}
