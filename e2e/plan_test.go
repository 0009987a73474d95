package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/planner"
)

func planJSON(t *testing.T, out string) planner.Plan {
	t.Helper()
	var p planner.Plan
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("plan -o json: %v\n%s", err, out)
	}
	return p
}

func TestPlanOfflineOnTheExamples(t *testing.T) {
	t.Parallel() // see parallelTests in helpers_test.go
	out, errOut, code := runGantry(t, "plan", "-f", "../examples/hello.yaml", "--offline", "-o", "json")
	if code != 0 {
		t.Fatalf("plan hello: %s", errOut)
	}
	p := planJSON(t, out)
	if len(p.Add) != 2 || len(p.Placements) != 3 || len(p.Pending) != 0 || p.Desired["dev/general"] != 2 {
		t.Fatalf("hello plan: %+v", p)
	}
	if p.LowerBound <= 0 || p.NewCapacityCost < p.LowerBound || p.CostAfter < p.NewCapacityCost {
		t.Fatalf("costs: %+v", p)
	}

	out, errOut, code = runGantry(t, "plan", "-f", "../examples/plan.yaml", "--catalog", "../examples/catalog.json", "--offline", "-o", "json")
	if code != 0 {
		t.Fatalf("plan with a user catalog: %s", errOut)
	}
	p = planJSON(t, out)
	if len(p.Pending) != 0 || len(p.Placements) != 17 {
		t.Fatalf("every replica of examples/plan.yaml must be placed: %+v", p.Pending)
	}
	zones := map[string]int{}
	where := map[string]string{}
	for _, nm := range p.Add {
		where[nm.Key] = nm.Zone
	}
	for _, pl := range p.Placements {
		if strings.HasPrefix(pl.Replica, "web-") {
			zones[where[pl.Machine]]++
		}
	}
	if len(zones) < 2 {
		t.Fatalf("web has zone spread but landed in %v", zones)
	}
	table, _, _ := runGantry(t, "plan", "-f", "../examples/plan.yaml", "--catalog", "../examples/catalog.json", "--offline")
	for _, want := range []string{"Machines to add", "Machines to remove", "lower bound", "desired machines: prod/general="} {
		if !strings.Contains(table, want) {
			t.Fatalf("table output lacks %q:\n%s", want, table)
		}
	}
}

func TestPlanRejectsABadCatalog(t *testing.T) {
	t.Parallel() // see parallelTests in helpers_test.go
	dir := t.TempDir()
	bad := writeFile(t, dir, "catalog.json", `{"instanceTypes": [{"name": "x", "cpu": "lots", "memory": "1Gi", "offerings": [{"zone": "a", "capacityType": "onDemand", "pricePerHour": 1}]}]}`)
	_, errOut, code := runGantry(t, "plan", "-f", "../examples/plan.yaml", "--catalog", bad, "--offline")
	if code != 1 || !strings.Contains(errOut, "instanceTypes[0].cpu") {
		t.Fatalf("bad catalog: exit %d, %s", code, errOut)
	}
	noCatalog := writeFile(t, dir, "exec.yaml", "kind: Cluster\nmetadata: {name: k}\nspec:\n  provider: {name: exec}\n  capacityGroups: [{groupId: g, minSize: 1, maxSize: 2}]\n")
	_, errOut, code = runGantry(t, "plan", "-f", noCatalog, "--offline")
	if code != 1 || !strings.Contains(errOut, "pass --catalog") {
		t.Fatalf("a provider without a built-in catalog: exit %d, %s", code, errOut)
	}
	// A Kubernetes cluster has no capacity groups (its API server places
	// the Pods): refused with them, planned with no machine without them.
	k8s := writeFile(t, dir, "k8s.yaml", "kind: Cluster\nmetadata: {name: k}\nspec:\n  provider: {name: kubernetes}\n  capacityGroups: [{groupId: g, minSize: 1, maxSize: 2}]\n")
	for _, args := range [][]string{{"plan", "-f", k8s, "--offline"}, {"validate", "-f", k8s}} {
		if _, errOut, code := runGantry(t, args...); code != 1 || !strings.Contains(errOut, "a kubernetes cluster has no capacity groups") {
			t.Fatalf("%v: exit %d, %s", args, code, errOut)
		}
	}
	k8s = writeFile(t, dir, "k8s.yaml", "kind: Cluster\nmetadata: {name: k}\nspec:\n  provider: {name: kubernetes}\n---\n"+
		"kind: Service\nmetadata: {name: web}\nspec: {cluster: k, image: \"nginx:1\", replicas: 2}\n")
	if out, errOut, code := runGantry(t, "plan", "-f", k8s, "--offline"); code != 0 || !strings.Contains(out, "Machines to add") {
		t.Fatalf("plan of a kubernetes cluster: exit %d, %s%s", code, out, errOut)
	}
	k8s = writeFile(t, dir, "k8s.yaml", "kind: Cluster\nmetadata: {name: k}\nspec:\n  provider: {name: kubernetes}\n---\n"+
		"kind: Service\nmetadata: {name: web}\nspec: {cluster: k, command: [gantry, hello], ports: [{name: http}]}\n")
	if _, errOut, code := runGantry(t, "validate", "-f", k8s); code != 1 || !strings.Contains(errOut, "spec.image: required on a kubernetes cluster") ||
		!strings.Contains(errOut, "spec.ports[0].containerPort: required on a kubernetes cluster") {
		t.Fatalf("a process service on a kubernetes cluster: exit %d, %s", code, errOut)
	}
	// examples/plan.yaml is aws: the built-in EC2 catalog prices it.
	if _, errOut, code = runGantry(t, "plan", "-f", "../examples/plan.yaml", "--offline"); code != 0 {
		t.Fatalf("aws with its built-in catalog: exit %d, %s", code, errOut)
	}
}

func TestPlanAgainstTheLiveServer(t *testing.T) {
	t.Parallel() // see parallelTests in helpers_test.go
	s := startWeb(t)
	dir := s.dataDir
	spec := writeFile(t, dir, "web.yaml", webSpec)
	out, errOut, code := s.gantry("plan", "-f", spec, "-o", "json")
	if code != 0 {
		t.Fatalf("plan: %s", errOut)
	}
	p := planJSON(t, out)
	if len(p.Add) != 0 || len(p.Remove) != 0 || len(p.Pending) != 0 {
		t.Fatalf("steady state must plan nothing: %+v", p)
	}
	if p.CostBefore <= 0 || p.CostAfter != p.CostBefore {
		t.Fatalf("costs: before %.4f after %.4f", p.CostBefore, p.CostAfter)
	}
	bigger := writeFile(t, dir, "web9.yaml", strings.Replace(webSpec, "replicas: 3", "replicas: 9", 1))
	out, _, _ = s.gantry("plan", "-f", bigger, "-o", "json")
	p = planJSON(t, out)
	// Two machines hold 3 replicas each; maxSize 3 allows one more.
	if len(p.Add) != 1 || len(p.Pending) != 0 || p.Desired["e2e/general"] != 3 || p.CostAfter <= p.CostBefore {
		t.Fatalf("plan for 9 replicas: %+v", p)
	}
	for _, pl := range p.Placements {
		if pl.Machine == "" {
			t.Fatalf("placement without machine: %+v", pl)
		}
	}
	// What apply refuses, plan refuses, with the same message.
	immutable := writeFile(t, dir, "cidr.yaml", strings.Replace(webSpec, "capacityGroups:", "containerCidr: 10.9.0.0/16\n  capacityGroups:", 1))
	_, planErr, planCode := s.gantry("plan", "-f", immutable)
	_, applyErr, applyCode := s.gantry("apply", "-f", immutable)
	if planCode != 1 || applyCode != 1 || !strings.Contains(planErr, "spec.containerCidr") ||
		strings.TrimPrefix(planErr, "error: ") != strings.TrimPrefix(applyErr, "error: "+immutable+": ") {
		t.Fatalf("plan: exit %d %q\napply: exit %d %q", planCode, planErr, applyCode, applyErr)
	}
}
