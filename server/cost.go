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
	mu       sync.Mutex
	at       time.Time
	perHour  float64
	bound    float64
	services []api.ServiceCost
	idle     float64
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
	kept, err := s.planFromScratch(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	report.PlanPerHour, report.LowerBoundPerHour, report.PlannedAt = kept.perHour, kept.bound, kept.at
	report.Services, report.IdlePerHour = api.NonNil(kept.services), kept.idle
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

// planFromScratch answers from the kept plan (and the services' costs,
// which read every replica) while it is younger than CostPlanTTL; one
// request at a time computes a new one.
func (s *Server) planFromScratch(ctx context.Context) (*scratchPlan, error) {
	c := &s.scratch
	c.mu.Lock()
	defer c.mu.Unlock()
	now := s.clock.Now()
	if !c.at.IsZero() && now.Sub(c.at) < s.cfg.CostPlanTTL {
		return c.copy(), nil
	}
	plan, err := s.ctrl.FromScratch(ctx)
	if err != nil {
		return nil, err
	}
	var machines []*api.Machine
	var replicas []*api.Replica
	err = s.store.View(ctx, func(tx store.Tx) error {
		if machines, err = tx.ListMachines(store.MachineFilter{LiveOnly: true}); err != nil {
			return err
		}
		replicas, err = tx.ListReplicas(store.ReplicaFilter{})
		return err
	})
	if err != nil {
		return nil, err
	}
	c.services, c.idle = costByService(machines, replicas)
	c.perHour, c.bound, c.at = plan.Capacity.NewCapacityCost, plan.Capacity.LowerBound, now
	return c.copy(), nil
}

// copy is the kept plan's figures, to read after its lock is let go.
func (c *scratchPlan) copy() *scratchPlan {
	return &scratchPlan{at: c.at, perHour: c.perHour, bound: c.bound, services: c.services, idle: c.idle}
}

// costByService shares each live machine's price among the replicas
// placed on it, by their requests' fractions of its allocatable CPU and
// memory, weighted alike; what no replica holds is idle.
func costByService(machines []*api.Machine, replicas []*api.Replica) ([]api.ServiceCost, float64) {
	byID := make(map[string]*api.Machine, len(machines))
	idle := 0.0
	for _, m := range machines {
		byID[m.ID] = m
		idle += m.PricePerHour
	}
	services := map[string]*api.ServiceCost{}
	for _, r := range replicas {
		m := byID[r.Machine]
		if m == nil || r.State == api.ReplicaFailed || r.State == api.ReplicaExited {
			continue
		}
		share := (fraction(r.Requests.MilliCPU, m.Allocatable.MilliCPU) + fraction(r.Requests.MemoryBytes, m.Allocatable.MemoryBytes)) / 2
		held := share * m.PricePerHour
		sc := services[r.Service]
		if sc == nil {
			sc = &api.ServiceCost{Service: r.Service, Cluster: r.Cluster}
			services[r.Service] = sc
		}
		sc.Replicas++
		sc.PerHour += held
		idle -= held
	}
	out := make([]api.ServiceCost, 0, len(services))
	for _, sc := range services {
		out = append(out, *sc)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].PerHour != out[j].PerHour {
			return out[i].PerHour > out[j].PerHour
		}
		return out[i].Service < out[j].Service
	})
	return out, max(idle, 0)
}

// fraction is part/whole, at most 1 (0 of nothing).
func fraction(part, whole int64) float64 {
	if whole <= 0 {
		return 0
	}
	return min(float64(part)/float64(whole), 1)
}
