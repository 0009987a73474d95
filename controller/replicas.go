package controller

import (
	"context"
	"fmt"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/spec"
	"github.com/gantry-dev/gantry/store"
)

// ReplicaID names the i-th replica of a service.
func ReplicaID(service string, i int) string { return fmt.Sprintf("%s-%d", service, i) }

// syncReplicas creates the replicas each service is missing, deletes those
// beyond its count (their agent stops them), and follows spec changes: a
// change of requests sends the replica back to the scheduler, any other
// change is picked up by the agent through the spec hash.
func (c *Controller) syncReplicas(ctx context.Context, snap *snapshot) error {
	existing := map[string]*api.Replica{}
	for _, r := range snap.replicas {
		existing[r.ID] = r
	}
	wanted := map[string]bool{}
	return c.store.Update(ctx, func(tx store.Tx) error {
		now := time.Now().UTC()
		for _, svc := range snap.services {
			hash, requests := spec.RuntimeHash(svc.Spec), spec.Requests(svc.Spec)
			for i := 0; i < svc.Spec.DesiredReplicas(); i++ {
				id := ReplicaID(svc.Metadata.Name, i)
				wanted[id] = true
				if err := syncReplica(tx, existing[id], svc, i, hash, requests, now); err != nil {
					return err
				}
			}
		}
		for _, r := range snap.replicas {
			if wanted[r.ID] {
				continue
			}
			if err := tx.DeleteReplica(r.ID); err != nil {
				return err
			}
			if err := store.Record(tx, api.EventNormal, "Removed", "Replica", r.ID, "service %s scaled down or deleted", r.Service); err != nil {
				return err
			}
		}
		return nil
	})
}

func syncReplica(tx store.Tx, r *api.Replica, svc *api.Service, index int, hash string, requests api.Resources, now time.Time) error {
	name := svc.Metadata.Name
	if r == nil {
		r = &api.Replica{ID: ReplicaID(name, index), Service: name, Cluster: svc.Spec.Cluster, Index: index,
			State: api.ReplicaPending, SpecHash: hash, Requests: requests, UpdatedAt: now}
		if err := tx.PutReplica(r); err != nil {
			return err
		}
		return store.Record(tx, api.EventNormal, "Created", "Replica", r.ID, "replica %d of service %s", index, name)
	}
	if r.SpecHash == hash && r.Requests == requests && r.Cluster == svc.Spec.Cluster {
		return nil
	}
	moved := r.Requests != requests || r.Cluster != svc.Spec.Cluster
	r.SpecHash, r.Requests, r.Cluster, r.UpdatedAt = hash, requests, svc.Spec.Cluster, now
	if moved && r.Machine != "" {
		r.Machine, r.State, r.Reason, r.Address, r.HostPorts, r.Health = "", api.ReplicaPending, "resources or cluster changed", "", nil, ""
	}
	if err := tx.PutReplica(r); err != nil {
		return err
	}
	return store.Record(tx, api.EventNormal, "Updated", "Replica", r.ID, "service %s changed (spec %s)", name, hash)
}
