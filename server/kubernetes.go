package server

import (
	"context"
	"fmt"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/store"
	"github.com/gantry-dev/gantry/target/kube"
)

// runKubernetes runs the Kubernetes clusters' watches for one term as
// leader: after every pass of the control loop (and on each tick) they
// are handed what their clusters must run, read from the store.
func (s *Server) runKubernetes(ctx context.Context) {
	watching := make(chan struct{})
	go func() { defer close(watching); s.kube.Run(ctx) }()
	defer func() { <-watching }() // a next term starts with no watch of this one
	ticker := s.clock.NewTicker(s.cfg.Controller.Interval)
	defer ticker.Stop()
	for {
		if err := s.syncKubernetes(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("read what the kubernetes clusters run", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		case <-s.passed:
		}
	}
}

// afterPass is the control loop's hook: the watches learn its decisions.
func (s *Server) afterPass() {
	select {
	case s.passed <- struct{}{}:
	default:
	}
}

// syncKubernetes reads what every Kubernetes cluster must run and hands it
// to the watches.
func (s *Server) syncKubernetes(ctx context.Context) error {
	var all []kube.Desired
	err := s.store.View(ctx, func(tx store.Tx) error {
		secrets := s.secretReader(tx)
		reads := kube.Reads{
			SpecOf: func(r *api.Replica) (*api.ServiceSpec, error) { return revisionSpec(tx, r) },
			SecretEnv: func(sp api.ServiceSpec) (map[string]string, error) {
				_, env, err := secrets.serviceSecrets(sp)
				return env, err
			},
		}
		var err error
		all, err = kube.DesireAll(tx, reads, s.log)
		return err
	})
	if err != nil {
		return err
	}
	s.kube.Set(all)
	return nil
}

// recordPods records what a cluster's Pod watch observed, a batch in one
// transaction, and wakes the control loop when a replica's state changed.
func (s *Server) recordPods(cluster string, observed []kube.Observed) error {
	changed := false
	err := s.fenced.Update(context.Background(), func(tx store.Tx) error {
		var err error
		changed, err = kube.RecordPods(tx, cluster, observed, s.statuses, s.clock.Now())
		return err
	})
	if err != nil {
		return fmt.Errorf("record Pod states of cluster %s: %w", cluster, err)
	}
	if changed {
		s.ctrl.Trigger()
	}
	return nil
}
