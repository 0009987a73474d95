package controller

import (
	"sort"

	"github.com/gantry-dev/gantry/decide"
	"github.com/gantry-dev/gantry/metrics"
)

// recordRollouts counts what a pass changed in the deployments and
// failover groups, comparing the memory it began with to the one it
// wrote, and sets their gauges.
func (c *Controller) recordRollouts(before, after decide.Memory) {
	if c.Metrics == nil {
		return
	}
	states := map[string]int{}
	for service, d := range after.Deployments {
		states[d.State]++
		old, seen := before.Deployments[service]
		if !seen || old.Number != d.Number {
			c.Metrics.DeploymentStarted()
		}
		if d.Done() && (!seen || old.Number != d.Number || !old.Done()) {
			c.Metrics.DeploymentFinished(d.State)
		}
	}
	groups := make([]metrics.FailoverGroup, 0, len(after.Failover))
	for name, st := range after.Failover {
		groups = append(groups, metrics.FailoverGroup{Name: name, Phase: st.Phase, Primary: st.Primary, Epoch: st.Epoch})
		if last := st.LastFailover; last != nil {
			if prev := before.Failover[name].LastFailover; prev == nil || !prev.Equal(*last) {
				c.Metrics.FailedOver(name)
			}
		}
	}
	sort.Slice(groups, func(i, j int) bool { return groups[i].Name < groups[j].Name })
	c.Metrics.SetRollouts(states, groups)
}
