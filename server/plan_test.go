package server

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// gantry plan against the server refuses what apply refuses, with the
// same answer, and changes nothing.
func TestPlanRefusesWhatApplyRefuses(t *testing.T) {
	ts := startServer(t, nil)
	if _, err := ts.admin.Apply(context.Background(), []byte(testCluster)); err != nil {
		t.Fatal(err)
	}
	before := ts.stateFingerprint(t)
	service := "kind: Service\nmetadata: {name: web}\nspec:\n  cluster: dev\n  command: [x]\n"
	for name, body := range map[string]string{
		"immutable CIDR":      strings.Replace(testCluster, "spec:\n", "spec:\n  containerCidr: 10.9.0.0/16\n", 1),
		"unknown provider":    strings.Replace(testCluster, "spec:\n", "spec:\n  provider: {name: kubernetes}\n", 1),
		"exec not configured": strings.Replace(testCluster, "spec:\n", "spec:\n  provider: {name: exec}\n", 1),
		"missing cluster":     strings.Replace(service, "cluster: dev", "cluster: nope", 1),
	} {
		t.Run(name, func(t *testing.T) {
			applyStatus, applyErr := ts.do(t, "POST", "/v1/apply", ts.AdminToken(), "application/yaml", []byte(body))
			planStatus, planErr := ts.do(t, "POST", "/v1/plan", ts.AdminToken(), "application/yaml", []byte(body))
			if applyStatus < 400 || planStatus != applyStatus || planErr != applyErr {
				t.Fatalf("apply: %d %+v\nplan:  %d %+v", applyStatus, applyErr, planStatus, planErr)
			}
		})
	}
	if after := ts.stateFingerprint(t); after != before {
		t.Fatalf("refused requests changed state:\nbefore %s\nafter  %s", before, after)
	}
}

// The server's plan is its control loop's decision on its state with the
// file's resources, and acts on nothing.
func TestPlanIsTheLoopsDecisionAndChangesNothing(t *testing.T) {
	ts := startServer(t, nil)
	if _, err := ts.admin.Apply(context.Background(), []byte(testCluster)); err != nil {
		t.Fatal(err)
	}
	before := ts.stateFingerprint(t)
	file := "kind: Service\nmetadata: {name: web}\nspec:\n  cluster: dev\n  command: [x]\n  replicas: 3\n  resources: {cpu: 600m, memory: 128Mi}\n"
	p, err := ts.admin.Plan(context.Background(), []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Add) != 3 || len(p.Placements) != 3 || p.Desired["dev/general"] != 3 || p.CostAfter <= 0 {
		data, _ := json.Marshal(p)
		t.Fatalf("plan: %s", data)
	}
	for _, pl := range p.Placements {
		if !strings.HasPrefix(pl.Machine, "new-") {
			t.Fatalf("placement on %q", pl.Machine)
		}
	}
	if after := ts.stateFingerprint(t); after != before {
		t.Fatalf("plan changed state:\nbefore %s\nafter  %s", before, after)
	}
}
