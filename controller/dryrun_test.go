package controller

import (
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/planner"
	"github.com/gantry-dev/gantry/provider/local"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/spec"
)

func parse(t *testing.T, src string) ([]*api.Cluster, []*api.Service) {
	t.Helper()
	docs, err := spec.Parse("t.yaml", []byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	var cs []*api.Cluster
	var ss []*api.Service
	for _, d := range docs {
		if d.Cluster != nil {
			cs = append(cs, d.Cluster)
		} else {
			ss = append(ss, d.Service)
		}
	}
	return cs, ss
}

func localCatalog(api.ProviderSpec) ([]provisioner.InstanceType, bool) { return local.Catalog(), true }

func TestDryRunPreempts(t *testing.T) {
	cs, ss := parse(t, `kind: Cluster
metadata: {name: tight}
spec:
  capacityGroups: [{groupId: one, instanceType: local.small, minSize: 1, maxSize: 1}]
---
kind: Service
metadata: {name: batch}
spec: {cluster: tight, command: [x], resources: {cpu: 800m}, placement: {priority: 1}}
---
kind: Service
metadata: {name: urgent}
spec: {cluster: tight, command: [x], resources: {cpu: 800m}, placement: {priority: 100, preemptLowerPriority: true}}
`)
	now := time.Now()
	m := &api.Machine{ID: "m1", Cluster: "tight", Group: "one", Provider: "local", JoinState: api.JoinJoined, FleetState: api.FleetActive,
		Runtimes: []string{"process"}, Capacity: api.Resources{MilliCPU: 1000, MemoryBytes: 1 << 30, EphemeralBytes: 10 << 30}, CreatedAt: now}
	batch := &api.Replica{ID: "batch-0", Service: "batch", Cluster: "tight", Machine: "m1", State: api.ReplicaRunning, Requests: spec.Requests(ss[0].Spec)}
	plan := DryRun(planner.DefaultConfig(), State{Clusters: cs, Services: ss, Machines: []*api.Machine{m}, Replicas: []*api.Replica{batch}}, localCatalog, now)
	if len(plan.Placements) != 1 || plan.Placements[0].Replica != "urgent-0" || plan.Placements[0].Machine != "m1" {
		t.Fatalf("urgent must preempt onto m1: %+v", plan.Placements)
	}
	if len(plan.Pending) != 1 || plan.Pending[0].Replica != "batch-0" || !strings.Contains(plan.Pending[0].Reason, "maxSize 1") {
		t.Fatalf("the preempted replica waits for capacity the group cannot add: %+v", plan.Pending)
	}
}

// With no machines, a dry run plans the group's machines and places every
// replica on them.
func TestDryRunOnEmptyClusters(t *testing.T) {
	cs, ss := parse(t, `kind: Cluster
metadata: {name: c}
spec:
  capacityGroups: [{groupId: g, instanceType: local.medium, minSize: 1, maxSize: 4}]
---
kind: Service
metadata: {name: web}
spec: {cluster: c, command: [x], replicas: 5, resources: {cpu: "1", memory: 256Mi}}
`)
	plan := DryRun(planner.DefaultConfig(), State{Clusters: cs, Services: ss}, localCatalog, time.Now())
	// local.medium has 2 CPUs: 5 one-CPU replicas need 3 machines.
	if len(plan.Add) != 3 || len(plan.Placements) != 5 || plan.Desired["c/g"] != 3 {
		t.Fatalf("plan %+v", plan)
	}
}
