package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/api"
)

const affinitySpec = `kind: Cluster
metadata: {name: aff}
spec:
  capacityGroups:
    - {groupId: general, instanceType: local.medium, minSize: 1, maxSize: 4}
  systemReserved: {cpu: 100m, memory: 128Mi}
---
kind: Service
metadata: {name: db, labels: {app: db}}
spec:
  cluster: aff
  command: [gantry, hello]
  ports: [{name: http}]
  replicas: 3
  resources: {cpu: 250m, memory: 128Mi}
  placement:
    antiAffinity: [{selector: {app: db}, topology: machine}]
---
kind: Service
metadata: {name: cache, labels: {app: cache}}
spec:
  cluster: aff
  command: [gantry, hello]
  ports: [{name: http}]
  resources: {cpu: 250m, memory: 128Mi}
  placement:
    antiAffinity: [{selector: {app: db}, topology: machine}]
---
kind: Service
metadata: {name: web}
spec:
  cluster: aff
  command: [gantry, hello]
  ports: [{name: http}]
  replicas: 2
  resources: {cpu: 250m, memory: 128Mi}
  placement:
    affinity: [{selector: {app: cache}, topology: machine}]
    antiAffinity: [{selector: {app: db}, topology: machine}]
`

// Affinity across services, live: the planner opens the machines a
// required anti-affinity forces (one per db replica, one more for what
// must keep away from them), the scheduler keeps the db replicas apart,
// and web follows the cache onto the one machine without a db. `gantry
// plan` shows the same machines before anything runs.
func TestAffinityAcrossServicesLive(t *testing.T) {
	t.Parallel() // see parallelTests in helpers_test.go
	s := startServer(t, t.TempDir(), "--local-exit-with-server")
	spec := writeFile(t, s.dataDir, "aff.yaml", affinitySpec)
	out, errOut, code := s.gantry("plan", "-f", spec)
	if code != 0 || machinesToAdd(out) != 4 || !strings.Contains(out, "desired machines: aff/general=4") {
		t.Fatalf("plan: want 4 machines to add\n%s%s", out, errOut)
	}
	s.apply(t, "aff.yaml", affinitySpec)
	var machineOf map[string]string
	waitFor(t, "every replica running", func() (bool, string) {
		machineOf = map[string]string{}
		for _, svc := range []string{"db", "cache", "web"} {
			for _, r := range s.replicas(svc) {
				if r.State != api.ReplicaRunning {
					return false, fmt.Sprintf("%s is %s: %s", r.ID, r.State, r.Reason)
				}
				machineOf[r.ID] = r.Machine
			}
		}
		return len(machineOf) == 6, fmt.Sprint(machineOf)
	})
	dbMachines := map[string]bool{}
	for _, id := range []string{"db-0", "db-1", "db-2"} {
		if dbMachines[machineOf[id]] {
			t.Fatalf("two db replicas on %s: %v", machineOf[id], machineOf)
		}
		dbMachines[machineOf[id]] = true
	}
	for _, id := range []string{"cache-0", "web-0", "web-1"} {
		if dbMachines[machineOf[id]] {
			t.Fatalf("%s runs next to a db on %s: %v", id, machineOf[id], machineOf)
		}
	}
	if machineOf["web-0"] != machineOf["cache-0"] || machineOf["web-1"] != machineOf["cache-0"] {
		t.Fatalf("web must follow the cache: %v", machineOf)
	}
	t.Logf("placements: %v", machineOf)
	if n := len(s.machines()); n != 4 {
		t.Fatalf("%d machines, want the 4 the rules force", n)
	}
}

// machinesToAdd counts the rows of `gantry plan`'s "Machines to add".
func machinesToAdd(planOutput string) int {
	n := 0
	for _, line := range strings.Split(planOutput, "\n") {
		if strings.HasPrefix(line, "new-") {
			n++
		}
	}
	return n
}
