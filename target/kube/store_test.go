package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/replica/ingest"
	"github.com/gantry-dev/gantry/store"
	"github.com/gantry-dev/gantry/store/sqlite/sqlitetest"
	"github.com/gantry-dev/gantry/target"
)

// storeWith opens a SQLite store holding a Kubernetes cluster "k" and a
// machine cluster "m", a service with a port and a Secret in its env
// ("web"), one without ports ("batch"), and replicas: two of web and one
// of batch placed as Pods, one of web not placed yet, one on a machine.
func storeWith(t *testing.T) store.Store {
	t.Helper()
	st := sqlitetest.Open(t)
	web := &api.Service{Metadata: api.ObjectMeta{Name: "web", Labels: map[string]string{"tier": "front"}}, Spec: api.ServiceSpec{Cluster: "k",
		Image: "nginx", Ports: []api.Port{{Name: "http", ContainerPort: 80}}, SecretEnv: map[string]api.SecretKeyRef{"TOKEN": {Name: "creds", Key: "token"}}}}
	batch := &api.Service{Metadata: api.ObjectMeta{Name: "batch"}, Spec: api.ServiceSpec{Cluster: "k", Image: "busybox"}}
	err := st.Update(context.Background(), func(tx store.Tx) error {
		for _, cl := range []*api.Cluster{
			{Metadata: api.ObjectMeta{Name: "k"}, Spec: api.ClusterSpec{Provider: api.ProviderSpec{Name: api.ProviderKubernetes, Config: map[string]string{"namespace": "apps"}}}},
			{Metadata: api.ObjectMeta{Name: "m"}, Spec: api.ClusterSpec{Provider: api.ProviderSpec{Name: "local"}}},
		} {
			if err := tx.PutCluster(cl); err != nil {
				return err
			}
		}
		for _, s := range []*api.Service{web, batch} {
			if err := tx.PutService(s); err != nil {
				return err
			}
		}
		for _, r := range []*api.Replica{
			{ID: "web-b", Service: "web", Cluster: "k", SpecHash: "h1", Pod: "apps/web-b", State: api.ReplicaStarting},
			{ID: "web-a", Service: "web", Cluster: "k", SpecHash: "h1", Pod: "apps/web-a", State: api.ReplicaStarting},
			{ID: "web-c", Service: "web", Cluster: "k", SpecHash: "h1", State: api.ReplicaPending},
			{ID: "batch-a", Service: "batch", Cluster: "k", SpecHash: "h2", Pod: "apps/batch-a", State: api.ReplicaStarting},
			{ID: "elsewhere", Service: "web", Cluster: "m", SpecHash: "h1", Machine: "m1", State: api.ReplicaStarting},
		} {
			if err := tx.PutReplica(r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// reads serves each replica its service's spec and the Secret's value.
func reads(tx store.Tx, secretErr error) target.KubernetesReads {
	return target.KubernetesReads{
		SpecOf: func(r *api.Replica) (*api.ServiceSpec, error) {
			svc, err := tx.GetService(r.Service)
			if err != nil {
				return nil, err
			}
			return &svc.Spec, nil
		},
		SecretEnv: func(sp api.ServiceSpec) (map[string]string, error) {
			if len(sp.SecretEnv) == 0 {
				return nil, nil
			}
			return map[string]string{"TOKEN": "s3cret"}, secretErr
		},
	}
}

// What a Kubernetes cluster must run is read from the store: a Pod for
// each placed replica in id order with its service's labels, a Service
// for each service with ports, the Secrets the Pods read; nothing of a
// machine cluster, nothing of a replica not placed yet.
func TestDesireIsWhatTheStoreSaysAClusterRuns(t *testing.T) {
	st := storeWith(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	_ = st.View(context.Background(), func(tx store.Tx) error {
		all, err := DesireAll(tx, reads(tx, nil), log)
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != 1 || all[0].Cluster != "k" || all[0].Settings.Namespace != "apps" {
			t.Fatalf("desired %+v, want the one Kubernetes cluster k in namespace apps", all)
		}
		d := all[0]
		var ids []string
		for _, w := range d.Workloads {
			ids = append(ids, w.Replica.ID)
			if w.Replica.Service == "web" && w.Labels["tier"] != "front" {
				t.Errorf("workload %s carries labels %v, want its service's", w.Replica.ID, w.Labels)
			}
		}
		if got := ids; len(got) != 3 || got[0] != "batch-a" || got[1] != "web-a" || got[2] != "web-b" {
			t.Errorf("workloads %v, want batch-a, web-a, web-b", got)
		}
		if _, ok := d.Services["web"]; !ok || len(d.Services) != 1 {
			t.Errorf("services %v, want web (the one with ports)", d.Services)
		}
		if d.Secrets["creds"]["token"] != "s3cret" {
			t.Errorf("secrets %v, want creds.token", d.Secrets)
		}
		return nil
	})
}

// A replica whose Secret cannot be read is left out of its cluster's
// Pods; the others are not.
func TestDesireLeavesOutAReplicaWhoseSecretIsMissing(t *testing.T) {
	st := storeWith(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	_ = st.View(context.Background(), func(tx store.Tx) error {
		all, err := DesireAll(tx, reads(tx, fmt.Errorf("%w: secret creds not found", target.ErrSecretMissing)), log)
		if err != nil {
			t.Fatal(err)
		}
		if w := all[0].Workloads; len(w) != 1 || w[0].Replica.ID != "batch-a" {
			t.Fatalf("workloads %+v, want batch-a alone", w)
		}
		// The store failing to read the Secret is no missing Secret: the
		// read fails, it does not leave Pods out.
		storeErr := errors.New("could not serialize access")
		if _, err := DesireAll(tx, reads(tx, storeErr), log); !errors.Is(err, storeErr) {
			t.Fatalf("a store error reading a Secret: %v, want it returned", err)
		}
		return nil
	})
}

// A Pod's state reaches its replica through the replica state machine,
// in one transaction, and says whether anything changed; a Pod of no
// replica is passed over.
func TestRecordPodsMovesReplicasByThePodsState(t *testing.T) {
	st := storeWith(t)
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	observed := []Observed{
		{Pod: "apps/web-a", Address: "10.1.2.3", Status: api.ReplicaStatus{ReplicaID: "web-a", SpecHash: "h1", State: api.ReplicaRunning, Node: "node-1"}},
		{Pod: "apps/orphan", Status: api.ReplicaStatus{ReplicaID: "orphan", State: api.ReplicaRunning}},
	}
	var changed bool
	err := st.Update(context.Background(), func(tx store.Tx) error {
		var err error
		changed, err = RecordPods(tx, "k", observed, ingest.Store{}, now)
		return err
	})
	if err != nil || !changed {
		t.Fatalf("changed %v, err %v; want a change", changed, err)
	}
	_ = st.View(context.Background(), func(tx store.Tx) error {
		r, err := tx.GetReplica("web-a")
		if err != nil || r.State != api.ReplicaRunning || r.Address != "10.1.2.3" {
			t.Fatalf("web-a %+v (%v), want running at 10.1.2.3", r, err)
		}
		other, _ := tx.GetReplica("web-b")
		if other.State != api.ReplicaStarting {
			t.Errorf("web-b %s, want starting: no Pod state was observed for it", other.State)
		}
		return nil
	})
	err = st.Update(context.Background(), func(tx store.Tx) error {
		var err error
		changed, err = RecordPods(tx, "k", observed[:1], ingest.Store{}, now.Add(time.Second))
		return err
	})
	if err != nil || changed {
		t.Fatalf("the same state again: changed %v, err %v; want no change", changed, err)
	}
}
