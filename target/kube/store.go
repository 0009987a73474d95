package kube

import (
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/replica"
	"github.com/gantry-dev/gantry/replica/ingest"
	"github.com/gantry-dev/gantry/spec"
	"github.com/gantry-dev/gantry/store"
	"github.com/gantry-dev/gantry/target"
)

// DesireAll is what every Kubernetes cluster must run, as the store says.
func DesireAll(tx store.Tx, reads target.KubernetesReads, log *slog.Logger) ([]Desired, error) {
	clusters, err := tx.ListClusters()
	if err != nil {
		return nil, err
	}
	var all []Desired
	for _, cl := range clusters {
		if !cl.Kubernetes() {
			continue
		}
		d, err := Desire(tx, cl, reads, log)
		if err != nil {
			return nil, fmt.Errorf("cluster %s: %w", cl.Metadata.Name, err)
		}
		all = append(all, d)
	}
	return all, nil
}

// Desire is what a Kubernetes cluster must run: a Pod for each placed
// replica (its revision's spec), a Service for each service with ports,
// and the Secrets their Pods read. A replica whose Secrets cannot be
// read is left out, with a warning, rather than failing the cluster.
func Desire(tx store.Tx, cl *api.Cluster, reads target.KubernetesReads, log *slog.Logger) (Desired, error) {
	settings, errs := spec.KubernetesConfig(cl.Spec.Provider)
	if errs != nil {
		return Desired{}, errs
	}
	d := Desired{Cluster: cl.Metadata.Name, Settings: settings, Services: map[string]api.ServiceSpec{}, Secrets: map[string]map[string]string{}}
	services, err := tx.ListServices()
	if err != nil {
		return d, err
	}
	labelsOf := map[string]map[string]string{}
	for _, svc := range services {
		labelsOf[svc.Metadata.Name] = svc.Metadata.Labels
		if svc.Spec.Cluster == d.Cluster && len(svc.Spec.Ports) > 0 {
			d.Services[svc.Metadata.Name] = svc.Spec
		}
	}
	replicas, err := tx.ListReplicas(store.ReplicaFilter{Cluster: d.Cluster})
	if err != nil {
		return d, err
	}
	specs := map[[2]string]*api.ServiceSpec{} // by service and revision: replicas share them
	for _, r := range replicas {
		if r.Pod == "" {
			continue
		}
		key := [2]string{r.Service, r.SpecHash}
		sp, ok := specs[key]
		if !ok {
			if sp, err = reads.SpecOf(r); err != nil {
				return d, err
			}
			specs[key] = sp
		}
		if sp == nil {
			continue // its service is gone: the replica goes too
		}
		env, err := reads.SecretEnv(*sp)
		if errors.Is(err, target.ErrSecretMissing) {
			log.Warn("replica left out of its cluster's Pods", "replica", r.ID, "cluster", d.Cluster, "err", err)
			continue
		}
		if err != nil {
			return d, err
		}
		for name, ref := range sp.SecretEnv {
			if d.Secrets[ref.Name] == nil {
				d.Secrets[ref.Name] = map[string]string{}
			}
			d.Secrets[ref.Name][ref.Key] = env[name]
		}
		d.Workloads = append(d.Workloads, Workload{Cluster: d.Cluster, Replica: *r, Spec: *sp, Labels: labelsOf[r.Service]})
	}
	sort.Slice(d.Workloads, func(i, j int) bool { return d.Workloads[i].Replica.ID < d.Workloads[j].Replica.ID })
	return d, nil
}

// RecordPods records what a cluster's Pod watch observed through the
// replica state machine, as heartbeats do for machines, and reports
// whether a replica's state changed. Pods of no replica (orphans about
// to be deleted) are passed over.
func RecordPods(tx store.Tx, cluster string, observed []Observed, sink ingest.Sink, now time.Time) (bool, error) {
	replicas, err := tx.ListReplicas(store.ReplicaFilter{Cluster: cluster})
	if err != nil {
		return false, err
	}
	byPod := map[string]*api.Replica{}
	for _, r := range replicas {
		if r.Pod != "" {
			byPod[r.Pod] = r
		}
	}
	changed := false
	for _, o := range observed {
		r := byPod[o.Pod]
		if r == nil {
			continue
		}
		before := r.State
		holder := "Pod " + o.Pod
		if o.Status.Node != "" {
			holder = "node " + o.Status.Node
		}
		rep := replica.Report{Holder: holder, Address: o.Address, Statuses: []api.ReplicaStatus{o.Status}}
		if err := sink.Record(tx, []*api.Replica{r}, rep, now); err != nil {
			return changed, err
		}
		changed = changed || before != r.State
	}
	return changed, nil
}
