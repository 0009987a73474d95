package controller

import (
	"context"

	"github.com/gantry-dev/gantry/api"
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

func (s *snapshot) liveMachines() []*api.Machine {
	var out []*api.Machine
	for _, m := range s.machines {
		if m.Live() {
			out = append(out, m)
		}
	}
	return out
}
