package server

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/decide"
	"github.com/gantry-dev/gantry/replica"
	"github.com/gantry-dev/gantry/spec"
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
		clusters, err := tx.ListClusters()
		if err != nil {
			return err
		}
		all = all[:0]
		for _, cl := range clusters {
			if !cl.Kubernetes() {
				continue
			}
			d, err := s.desiredOf(tx, cl)
			if err != nil {
				return fmt.Errorf("cluster %s: %w", cl.Metadata.Name, err)
			}
			all = append(all, d)
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.kube.Set(all)
	return nil
}

// desiredOf is what a Kubernetes cluster must run: a Pod for each placed
// replica (its revision's spec), a Service for each service with ports,
// and the Secrets their Pods read.
func (s *Server) desiredOf(tx store.Tx, cl *api.Cluster) (kube.Desired, error) {
	settings, errs := spec.KubernetesConfig(cl.Spec.Provider)
	if errs != nil {
		return kube.Desired{}, errs
	}
	d := kube.Desired{Cluster: cl.Metadata.Name, Settings: settings, Services: map[string]api.ServiceSpec{}, Secrets: map[string]map[string]string{}}
	services, err := tx.ListServices()
	if err != nil {
		return d, err
	}
	for _, svc := range services {
		if svc.Spec.Cluster == d.Cluster && len(svc.Spec.Ports) > 0 {
			d.Services[svc.Metadata.Name] = svc.Spec
		}
	}
	replicas, err := tx.ListReplicas(store.ReplicaFilter{Cluster: d.Cluster})
	if err != nil {
		return d, err
	}
	secrets := s.secretReader(tx)
	specs := map[string]*api.ServiceSpec{} // by revision: replicas share them
	labelsOf := map[string]map[string]string{}
	for _, r := range replicas {
		if r.Pod == "" {
			continue
		}
		key := decide.RevisionKey(r.Service, r.SpecHash)
		sp, ok := specs[key]
		if !ok {
			if sp, err = revisionSpec(tx, r); err != nil {
				return d, err
			}
			specs[key] = sp
		}
		if sp == nil {
			continue // its service is gone: the replica goes too
		}
		_, env, err := secrets.serviceSecrets(*sp)
		if err != nil {
			s.log.Warn("replica left out of its cluster's Pods", "replica", r.ID, "cluster", d.Cluster, "err", err)
			continue
		}
		for name, ref := range sp.SecretEnv {
			if d.Secrets[ref.Name] == nil {
				d.Secrets[ref.Name] = map[string]string{}
			}
			d.Secrets[ref.Name][ref.Key] = env[name]
		}
		labels, err := serviceLabels(tx, labelsOf, r.Service)
		if err != nil {
			return d, err
		}
		d.Workloads = append(d.Workloads, kube.Workload{Cluster: d.Cluster, Replica: *r, Spec: *sp, Labels: labels})
	}
	sort.Slice(d.Workloads, func(i, j int) bool { return d.Workloads[i].Replica.ID < d.Workloads[j].Replica.ID })
	return d, nil
}

// recordPods records what a cluster's pod watch observed, through the
// replica state machine, as heartbeats do for machines: a batch in one
// transaction.
func (s *Server) recordPods(cluster string, observed []kube.Observed) error {
	changed := false
	err := s.fenced.Update(context.Background(), func(tx store.Tx) error {
		replicas, err := tx.ListReplicas(store.ReplicaFilter{Cluster: cluster})
		if err != nil {
			return err
		}
		byPod := map[string]*api.Replica{}
		for _, r := range replicas {
			if r.Pod != "" {
				byPod[r.Pod] = r
			}
		}
		now := s.clock.Now()
		for _, o := range observed {
			r := byPod[o.Pod]
			if r == nil {
				continue // an orphan, about to be deleted
			}
			before := r.State
			holder := "Pod " + o.Pod
			if o.Status.Node != "" {
				holder = "node " + o.Status.Node
			}
			rep := replica.Report{Holder: holder, Address: o.Address, Statuses: []api.ReplicaStatus{o.Status}}
			if err := s.statuses.Record(tx, []*api.Replica{r}, rep, now); err != nil {
				return err
			}
			changed = changed || before != r.State
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("record Pod states of cluster %s: %w", cluster, err)
	}
	if changed {
		s.ctrl.Trigger()
	}
	return nil
}

// serviceLabels reads a service's labels once per call.
func serviceLabels(tx store.Tx, cache map[string]map[string]string, service string) (map[string]string, error) {
	if labels, ok := cache[service]; ok {
		return labels, nil
	}
	svc, err := tx.GetService(service)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	cache[service] = svc.Metadata.Labels
	return svc.Metadata.Labels, nil
}
