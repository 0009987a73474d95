package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
)

const habitsSpec = `kind: Cluster
metadata: {name: e2e}
spec:
  capacityGroups:
    - {groupId: general, instanceType: local.medium, minSize: 2, maxSize: 2}
  systemReserved: {cpu: 100m, memory: 128Mi}
`

const habitsService = `kind: Service
metadata: {name: many, labels: {app: many, tier: web}}
spec:
  cluster: e2e
  command: [sleep, "3600"]
  replicas: 12
  resources: {cpu: 10m, memory: 16Mi}
`

const pendingService = `kind: Service
metadata: {name: nowhere, labels: {app: nowhere}}
spec:
  cluster: e2e
  command: [sleep, "3600"]
  resources: {cpu: 10m, memory: 16Mi}
  placement: {nodeSelector: {disk: nvme}}
`

// The CLI in kubectl's and Nomad's habits, through the built binary:
// directories and several files applied all or none, diff, delete -f,
// get with selectors, sorting, names, JSONPath, natural order, watch,
// pending reasons and integral quantities, -o yaml that applies back,
// cordon, a second drain, version and completion from the server.
func TestCLIHabits(t *testing.T) {
	t.Parallel() // see parallelTests in helpers_test.go
	s := startServer(t, t.TempDir(), "--local-exit-with-server")
	dir := filepath.Join(s.dataDir, "specs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "1-cluster.yaml", habitsSpec)
	writeFile(t, dir, "2-many.yaml", habitsService)
	bad := writeFile(t, s.dataDir, "bad.yaml", strings.Replace(pendingService, "cpu: 10m", "cpu: lots", 1))
	if _, errOut, code := s.gantry("apply", "-f", dir, "-f", bad); code == 0 || !strings.Contains(errOut, "bad.yaml: document 1: spec.resources.cpu") {
		t.Fatalf("apply -f DIR -f BAD: exit %d %s", code, errOut)
	}
	if out, _, _ := s.gantry("get", "clusters", "-o", "name"); strings.TrimSpace(out) != "" {
		t.Fatalf("a refused apply applied something: %q", out)
	}
	if out, errOut, code := s.gantry("diff", "-f", dir); code != 1 || !strings.Contains(out, "service/many created") {
		t.Fatalf("diff before apply: exit %d %s%s", code, out, errOut)
	}
	if out, errOut, code := s.gantry("apply", "-f", dir, "-f", writeFile(t, s.dataDir, "pending.yaml", pendingService)); code != 0 || strings.Count(out, "created") != 3 {
		t.Fatalf("apply -f DIR -f FILE: exit %d %s%s", code, out, errOut)
	}
	if out, errOut, code := s.gantry("diff", "-f", dir); code != 0 || out != "" {
		t.Fatalf("diff after apply: exit %d %q %s", code, out, errOut)
	}
	waitFor(t, "12 replicas running", func() (bool, string) {
		out, _, _ := s.gantry("get", "replicas", "-l", "app=many", "-o", "jsonpath={.items[*].state}")
		return strings.Count(out, "running") == 12, out
	})

	out, _, _ := s.gantry("get", "replicas", "-l", "app=many", "-o", "name")
	want := "replica/many-0\nreplica/many-1\nreplica/many-2\n"
	if !strings.HasPrefix(out, want) || !strings.Contains(out, "replica/many-9\nreplica/many-10\nreplica/many-11\n") {
		t.Fatalf("get -o name is not in natural order:\n%s", out)
	}
	if out, _, _ := s.gantry("get", "replicas", "-l", "app=nowhere", "--no-headers"); !strings.HasPrefix(out, "nowhere-0") || !strings.Contains(out, "pending") || !strings.Contains(out, "labels do not match nodeSelector") {
		t.Fatalf("a pending replica without its reason, or a header:\n%s", out)
	}
	if out, _, _ := s.gantry("get", "services", "-l", "tier=web,app!=nowhere", "-o", "name"); out != "service/many\n" {
		t.Fatalf("label selector: %q", out)
	}
	out, _, _ = s.gantry("get", "replicas", "-l", "app=many", "--sort-by", "{.index}", "-o", "jsonpath={.items[*].index}")
	if out != "0 1 2 3 4 5 6 7 8 9 10 11\n" {
		t.Fatalf("--sort-by .index: %q", out)
	}
	out, _, _ = s.gantry("get", "machines", "-o", "yaml")
	if regexp.MustCompile(`e\+0\d`).MatchString(out) || !strings.Contains(out, "memoryBytes: 2013265920") {
		t.Fatalf("get -o yaml prints quantities as floats:\n%s", out)
	}

	// What get -o yaml prints applies back unchanged.
	yamlOut, _, _ := s.gantry("get", "service", "many", "-o", "yaml")
	apply := exec.Command(gantryBin, "--data-dir", s.dataDir, "apply", "-f", "-")
	apply.Stdin = strings.NewReader(yamlOut)
	if out, err := apply.CombinedOutput(); err != nil || !strings.Contains(string(out), "service/many unchanged") {
		t.Fatalf("get -o yaml | apply -f -: %v %s", err, out)
	}

	// Watch: a scale shows up as new rows.
	lines, stopWatch := s.watchOutput("get", "replicas", "-l", "app=many", "-w", "--poll-interval", "200ms")
	defer stopWatch()
	waitLine(t, lines, "many-11 ")
	if _, errOut, code := s.gantry("scale", "service", "many", "--replicas", "13"); code != 0 {
		t.Fatalf("scale: %s", errOut)
	}
	waitLine(t, lines, "many-12 ")
	stopWatch()

	// Cordon: new replicas avoid the machine; a second drain is no error.
	machines := s.machines()
	if out, errOut, code := s.gantry("cordon", machines[0].ID); code != 0 || !strings.Contains(out, "cordoned") {
		t.Fatalf("cordon: exit %d %s%s", code, out, errOut)
	}
	if _, errOut, code := s.gantry("scale", "service", "many", "--replicas", "16"); code != 0 {
		t.Fatalf("scale: %s", errOut)
	}
	waitFor(t, "3 new replicas on the other machine", func() (bool, string) {
		placed := 0
		for _, r := range s.replicas("many") {
			if r.Index >= 13 && r.Machine != "" {
				if r.Machine == machines[0].ID {
					t.Fatalf("replica %s placed on the cordoned machine", r.ID)
				}
				placed++
			}
		}
		return placed == 3, fmt.Sprintf("%d placed", placed)
	})
	if out, errOut, code := s.gantry("uncordon", machines[0].ID); code != 0 || !strings.Contains(out, "uncordoned") {
		t.Fatalf("uncordon: exit %d %s%s", code, out, errOut)
	}
	// A drain of the machine finishes fast (its replicas move at once), so
	// it comes after the uncordon, which a terminated machine refuses.
	for i := 0; i < 2; i++ {
		if out, errOut, code := s.gantry("drain", machines[0].ID); code != 0 || !strings.Contains(out, "draining") && !strings.Contains(out, "already drained") {
			t.Fatalf("drain #%d: exit %d %s%s", i+1, code, out, errOut)
		}
	}
	rolloutVerbs(t, s)
	if out, _, _ := s.gantry("get", "services", "many", "-o", "wide"); !strings.Contains(out, "10m") || !strings.Contains(out, "16Mi") {
		t.Fatalf("get services -o wide prints CPU and memory unlike the machine columns:\n%s", out)
	}
	if out, _, _ := s.gantry("get", "events", "--since", "1h", "-o", "name"); !strings.Contains(out, "event/") {
		t.Fatalf("get events --since: %q", out)
	}
	if out, _, code := runGantry(t, "--version"); code != 0 || !strings.HasPrefix(out, "gantry ") {
		t.Fatalf("--version: %q", out)
	}
	resp, err := trustingClient(s.dataDir, 5*time.Second).Get(s.url + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	var health map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&health)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || health["version"] == nil {
		t.Fatalf("/healthz without a version: %v", health)
	}
	if out, _, _ := s.gantry("__complete", "logs", "many-1"); !strings.Contains(out, "many-1\n") || !strings.Contains(out, "many-10\n") {
		t.Fatalf("completion of replica names: %q", out)
	}
	if out, errOut, code := s.gantry("delete", "-f", writeFile(t, s.dataDir, "pending.yaml", pendingService)); code != 0 || out != "service/nowhere deleted\n" {
		t.Fatalf("delete -f: exit %d %q %s", code, out, errOut)
	}
	var svcs []api.Service
	if svcs, err = s.api.ListServices(context.Background()); err != nil || len(svcs) != 2 { // many and tiny
		t.Fatalf("after delete -f: %v %d services", err, len(svcs))
	}
}

// waitLine reads lines until one contains text.
func waitLine(t *testing.T, lines <-chan string, text string) {
	t.Helper()
	deadline := time.After(waitLimit)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the watch ended before printing %q", text)
			}
			if strings.Contains(l, text) {
				return
			}
		case <-deadline:
			t.Fatalf("the watch printed no %q", text)
		}
	}
}

const tinyService = `kind: Service
metadata: {name: tiny}
spec:
  cluster: e2e
  command: [sleep, "3600"]
  env: {V: "1"}
  replicas: 2
  resources: {cpu: 10m, memory: 16Mi}
`

// rolloutVerbs: pause holds a deployment (rollout status says so, -w
// gives up after --timeout), resume finishes it, history shows a
// revision's spec; events stream with get events -w.
func rolloutVerbs(t *testing.T, s *server) {
	t.Helper()
	s.apply(t, "tiny.yaml", tinyService)
	if out, errOut, code := s.gantry("rollout", "status", "tiny", "-w", "--timeout", "60s"); code != 0 || !strings.Contains(out, "revision 1 Complete") {
		t.Fatalf("rollout status -w: exit %d %s%s", code, out, errOut)
	}
	lines, stopWatch := s.watchOutput("get", "events", "-w", "--poll-interval", "200ms")
	defer stopWatch()
	if out, errOut, code := s.gantry("rollout", "pause", "tiny"); code != 0 || out != "service/tiny paused\n" {
		t.Fatalf("rollout pause: exit %d %q %s", code, out, errOut)
	}
	waitLine(t, lines, "RolloutPaused")
	s.apply(t, "tiny2.yaml", strings.Replace(tinyService, `V: "1"`, `V: "2"`, 1)+"  update: {paused: true}\n")
	waitFor(t, "the deployment paused", func() (bool, string) {
		out, _, _ := s.gantry("rollout", "status", "tiny")
		return strings.Contains(out, "revision 2 Paused: 0/2 updated"), out
	})
	if out, errOut, code := s.gantry("rollout", "status", "tiny", "-w", "--timeout", "1s"); code != 1 || !strings.Contains(errOut, "did not end within 1s") {
		t.Fatalf("rollout status -w --timeout on a paused deployment: exit %d %s%s", code, out, errOut)
	}
	if out, errOut, code := s.gantry("rollout", "resume", "tiny"); code != 0 || out != "service/tiny resumed\n" {
		t.Fatalf("rollout resume: exit %d %q %s", code, out, errOut)
	}
	if out, errOut, code := s.gantry("rollout", "status", "tiny", "-w", "--timeout", "60s"); code != 0 || !strings.Contains(out, "revision 2 Complete: 2/2 updated") {
		t.Fatalf("rollout status -w after resume: exit %d %s%s", code, out, errOut)
	}
	waitLine(t, lines, "DeploymentComplete")
	stopWatch()
	if out, _, _ := s.gantry("rollout", "history", "tiny", "--revision", "1"); !strings.Contains(out, "revision 1 (apply) of service/tiny") || !strings.Contains(out, `V: "1"`) {
		t.Fatalf("rollout history --revision 1:\n%s", out)
	}
}
