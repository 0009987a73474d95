package server

import (
	"context"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/store"
)

// scratchPlan keeps the last plan from scratch for Config.CostPlanTTL.
type scratchPlan struct {
	mu      sync.Mutex
	at      time.Time
	perHour float64
	bound   float64
}

// handleCost is the cost view: the live machines' $/hour by cluster and
// group, and the plan from scratch with its lower bound.
func (s *Server) handleCost(w http.ResponseWriter, r *http.Request) {
	var machines []*api.Machine
	err := s.store.View(r.Context(), func(tx store.Tx) error {
		var err error
		machines, err = tx.ListMachines(store.MachineFilter{LiveOnly: true})
		return err
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	report := costByGroup(machines)
	if report.PlanPerHour, report.LowerBoundPerHour, report.PlannedAt, err = s.planFromScratch(r.Context()); err != nil {
		s.writeError(w, r, err)
		return
	}
	if report.LowerBoundPerHour > 0 {
		report.Gap = report.PerHour/report.LowerBoundPerHour - 1
		report.PlanGap = report.PlanPerHour/report.LowerBoundPerHour - 1
	}
	writeJSON(w, http.StatusOK, report)
}

func costByGroup(machines []*api.Machine) api.CostReport {
	clusters := map[string]*api.ClusterCost{}
	groups := map[[2]string]*api.GroupCost{}
	var report api.CostReport
	for _, m := range machines {
		c := clusters[m.Cluster]
		if c == nil {
			c = &api.ClusterCost{Name: m.Cluster}
			clusters[m.Cluster] = c
		}
		g := groups[[2]string{m.Cluster, m.Group}]
		if g == nil {
			g = &api.GroupCost{Group: m.Group}
			groups[[2]string{m.Cluster, m.Group}] = g
		}
		g.Machines++
		g.PerHour += m.PricePerHour
		c.PerHour += m.PricePerHour
		report.PerHour += m.PricePerHour
	}
	for key, g := range groups {
		clusters[key[0]].Groups = append(clusters[key[0]].Groups, *g)
	}
	for _, c := range clusters {
		sort.Slice(c.Groups, func(i, j int) bool { return c.Groups[i].Group < c.Groups[j].Group })
		report.Clusters = append(report.Clusters, *c)
	}
	sort.Slice(report.Clusters, func(i, j int) bool { return report.Clusters[i].Name < report.Clusters[j].Name })
	report.Clusters = api.NonNil(report.Clusters)
	return report
}

// planFromScratch answers from the kept plan while it is younger than
// CostPlanTTL; one request at a time computes a new one.
func (s *Server) planFromScratch(ctx context.Context) (perHour, bound float64, at time.Time, err error) {
	c := &s.scratch
	c.mu.Lock()
	defer c.mu.Unlock()
	now := s.clock.Now()
	if !c.at.IsZero() && now.Sub(c.at) < s.cfg.CostPlanTTL {
		return c.perHour, c.bound, c.at, nil
	}
	plan, err := s.ctrl.FromScratch(ctx)
	if err != nil {
		return 0, 0, time.Time{}, err
	}
	c.perHour, c.bound, c.at = plan.Capacity.NewCapacityCost, plan.Capacity.LowerBound, now
	return c.perHour, c.bound, c.at, nil
}
