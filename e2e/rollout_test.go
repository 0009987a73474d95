package e2e

import (
	"context"
	"strings"
	"testing"
)

const rolloutSpec = `kind: Cluster
metadata: {name: e2e}
spec:
  agent: {version: "VERSION"}
  capacityGroups:
    - {groupId: general, instanceType: local.medium, minSize: 2, maxSize: 3}
  systemReserved: {cpu: 100m, memory: 128Mi}
---
kind: Service
metadata: {name: web}
spec:
  cluster: e2e
  command: [gantry, hello]
  ports: [{name: http}]
  replicas: 3
  resources: {cpu: 500m, memory: 256Mi}
  healthCheck: {http: {port: http, path: /healthz}, intervalSeconds: 1}
`

// A template change replaces every machine, one at a time, while the
// replicas keep answering; `gantry get clusters` shows the progress.
func TestTemplateChangeRollsMachines(t *testing.T) {
	t.Parallel() // see parallelTests in helpers_test.go
	dir := t.TempDir()
	s := startServer(t, dir, "--local-exit-with-server")
	spec := func(v string) string {
		return writeFile(t, dir, "c.yaml", strings.Replace(rolloutSpec, "VERSION", v, 1))
	}
	if _, errOut, code := s.gantry("apply", "-f", spec("1.0")); code != 0 {
		t.Fatalf("apply: %s", errOut)
	}
	waitFor(t, "3 replicas answering HTTP", func() (bool, string) { return allAnswer(s.replicas("web"), 3) })
	old := map[string]bool{}
	for _, m := range s.machines() {
		old[m.ID] = true
	}
	if out, errOut, code := s.gantry("apply", "-f", spec("2.0")); code != 0 || !strings.Contains(out, "spec.agent") {
		t.Fatalf("apply 2.0: %s %s", out, errOut)
	}
	sawRolling := false
	waitFor(t, "every machine replaced", func() (bool, string) {
		out, _, _ := s.gantry("get", "clusters")
		sawRolling = sawRolling || strings.Contains(out, "(rolling)")
		c, err := s.api.GetCluster(context.Background(), "e2e")
		if err != nil {
			return false, err.Error()
		}
		g := c.Status.Groups[0]
		for _, m := range s.machines() {
			if old[m.ID] {
				return false, "old machine " + m.ID + " still live (" + string(m.FleetState) + ")"
			}
		}
		if g.Updated != g.Current || g.Current < 2 {
			return false, "updated " + itoa(g.Updated) + "/" + itoa(g.Current)
		}
		return allAnswer(s.replicas("web"), 3)
	})
	if !sawRolling {
		t.Error("gantry get clusters never showed the rollout in progress")
	}
	events, _, _ := s.gantry("get", "events")
	for _, want := range []string{"RolloutStarted", "RolloutComplete", "rollout: replaces"} {
		if !strings.Contains(events, want) {
			t.Errorf("events lack %q", want)
		}
	}
}
