package e2e

import (
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/api"
)

const preemptSpec = `kind: Cluster
metadata: {name: tight}
spec:
  capacityGroups:
    - {groupId: one, instanceType: local.small, minSize: 1, maxSize: 1}
---
kind: Service
metadata: {name: batch}
spec:
  cluster: tight
  command: [gantry, hello]
  ports: [{name: http}]
  replicas: 1
  resources: {cpu: 800m, memory: 256Mi}
  placement: {priority: 1}
`

const urgentSpec = `kind: Service
metadata: {name: urgent}
spec:
  cluster: tight
  command: [gantry, hello]
  ports: [{name: http}]
  replicas: 1
  resources: {cpu: 800m, memory: 256Mi}
  placement: {priority: 100, preemptLowerPriority: true}
`

// A higher-priority service that may preempt takes the only machine; the
// lower one goes back to pending, says why, and its process stops.
func TestPreemptionMakesRoomForHigherPriority(t *testing.T) {
	t.Parallel() // see parallelTests in helpers_test.go
	dir := t.TempDir()
	s := startServer(t, dir, "--local-exit-with-server")
	s.apply(t, "batch.yaml", preemptSpec)
	waitFor(t, "batch running", func() (bool, string) { return allAnswer(s.replicas("batch"), 1) })
	batch := s.replicas("batch")[0]
	s.apply(t, "urgent.yaml", urgentSpec)
	waitFor(t, "urgent running in batch's place", func() (bool, string) {
		if ok, why := allAnswer(s.replicas("urgent"), 1); !ok {
			return false, why
		}
		b := s.replicas("batch")[0]
		return b.State == api.ReplicaPending && b.Machine == "", string(b.State) + " on " + b.Machine
	})
	waitFor(t, "the preempted process stopped", func() (bool, string) {
		_, ok := answers(batch)
		return !ok, "batch-0 still answers"
	})
	// The reason moves on with each pass; the event keeps why it moved.
	events, _, _ := s.gantry("get", "events")
	if !strings.Contains(events, "preempted by higher-priority replica urgent-0") {
		t.Fatalf("no Preempted event:\n%s", events)
	}
}
