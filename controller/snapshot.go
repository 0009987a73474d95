package controller

import (
	"context"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/metrics"
	"github.com/gantry-dev/gantry/store"
)

type snapshot struct {
	clusters map[string]*api.Cluster
	services []*api.Service
	machines []*api.Machine
	replicas []*api.Replica
}

func (c *Controller) load(ctx context.Context) (*snapshot, error) {
	s := &snapshot{clusters: map[string]*api.Cluster{}}
	err := c.store.View(ctx, func(tx store.Tx) error {
		clusters, err := tx.ListClusters()
		if err != nil {
			return err
		}
		for _, cl := range clusters {
			s.clusters[cl.Metadata.Name] = cl
		}
		if s.services, err = tx.ListServices(); err != nil {
			return err
		}
		if s.machines, err = tx.ListMachines(store.MachineFilter{LiveOnly: true}); err != nil {
			return err
		}
		s.replicas, err = tx.ListReplicas(store.ReplicaFilter{})
		return err
	})
	return s, err
}

// fleetCounts are the gauges' values: machines by state, pending replicas.
func fleetCounts(s *snapshot) ([]metrics.MachineCount, map[string]int) {
	byKey := map[[3]string]int{}
	for _, m := range s.machines {
		byKey[[3]string{m.Cluster, m.JoinState, m.FleetState}]++
	}
	counts := make([]metrics.MachineCount, 0, len(byKey))
	for k, n := range byKey {
		counts = append(counts, metrics.MachineCount{Cluster: k[0], JoinState: k[1], FleetState: k[2], N: n})
	}
	pending := map[string]int{}
	for name := range s.clusters {
		pending[name] = 0
	}
	for _, r := range s.replicas {
		if r.Machine == "" {
			pending[r.Cluster]++
		}
	}
	return counts, pending
}

func (s *snapshot) liveMachines() []*api.Machine {
	var out []*api.Machine
	for _, m := range s.machines {
		if m.Live() {
			out = append(out, m)
		}
	}
	return out
}
