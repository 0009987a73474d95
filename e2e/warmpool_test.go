package e2e

import (
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/api"
)

const warmSpec = `kind: Cluster
metadata: {name: warm}
spec:
  capacityGroups:
    - {groupId: g, instanceType: local.small, minSize: 1, maxSize: 4, warmPool: 1, warmPoolState: stopped}
---
kind: Service
metadata: {name: web}
spec:
  cluster: warm
  command: [gantry, hello]
  ports: [{name: http}]
  replicas: REPLICAS
  resources: {cpu: 600m, memory: 128Mi}
`

// An idle machine is stopped into the warm pool, and on scale-up it is
// started again — with the addresses Start returns — before any launch.
func TestStoppedWarmPoolStartsBeforeLaunching(t *testing.T) {
	t.Parallel() // see parallelTests in helpers_test.go
	dir := t.TempDir()
	s := startServer(t, dir, "--local-exit-with-server", "--empty-machine-ttl", "500ms")
	apply := func(n string) { s.apply(t, "w.yaml", strings.Replace(warmSpec, "REPLICAS", n, 1)) }
	apply("1")
	var warm string
	waitFor(t, "one machine serving and one stopped in the warm pool", func() (bool, string) {
		if ok, why := allAnswer(s.replicas("web"), 1); !ok {
			return false, why
		}
		states := map[api.FleetState]int{}
		for _, m := range s.machines() {
			states[m.FleetState]++
			if m.FleetState == api.FleetStopped {
				warm = m.ID
			}
		}
		return states[api.FleetStopped] == 1 && states[api.FleetActive] == 1 && len(states) == 2, "fleet " + strings.TrimSpace(strings.Repeat(" ", 0)+stateString(states))
	})
	launchedBefore := len(localInstances(dir))
	apply("2")
	waitFor(t, "the warm machine serving the second replica", func() (bool, string) {
		rs := s.replicas("web")
		if ok, why := allAnswer(rs, 2); !ok {
			return false, why
		}
		for _, r := range rs {
			if r.Machine == warm {
				return true, ""
			}
		}
		return false, "no replica on " + warm
	})
	if n := len(localInstances(dir)); n != launchedBefore && n != launchedBefore+1 {
		t.Fatalf("instances %d → %d", launchedBefore, n)
	}
	events, _, _ := s.gantry("get", "events")
	for _, want := range []string{"Stopped", "Started"} {
		if !strings.Contains(events, want) {
			t.Fatalf("events lack %s:\n%s", want, events)
		}
	}
}

func stateString(m map[api.FleetState]int) string {
	var parts []string
	for k, v := range m {
		parts = append(parts, string(k)+"="+itoa(v))
	}
	return strings.Join(parts, ",")
}
