package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
)

// deploySpec is a service of real `gantry hello` processes with a health
// check; {{REPLICAS}}, {{GREETING}} and {{EXTRA}} (more spec lines) vary.
const deploySpec = `kind: Cluster
metadata: {name: e2e}
spec:
  capacityGroups:
    - {groupId: general, instanceType: local.medium, minSize: 2, maxSize: 3}
  systemReserved: {cpu: 100m, memory: 128Mi}
---
kind: Service
metadata: {name: web}
spec:
  cluster: e2e
  command: [gantry, hello]
  env: {GREETING: "{{GREETING}}"}
  ports: [{name: http}, {name: admin}]
  replicas: {{REPLICAS}}
  resources: {cpu: 100m, memory: 64Mi}
  healthCheck:
    http: {port: http, path: /healthz}
    intervalSeconds: 1
    failureThreshold: 2
  update: {maxSurge: 1, maxUnavailable: 0, progressDeadlineSeconds: 12}
{{EXTRA}}`

func deployment(replicas int, greeting, extra string) string {
	r := strings.NewReplacer("{{REPLICAS}}", fmt.Sprint(replicas), "{{GREETING}}", greeting, "{{EXTRA}}", extra)
	return r.Replace(deploySpec)
}

// every runs fn every interval in the background until the returned
// stop is called (which waits for the last run).
func every(interval time.Duration, fn func()) (stop func()) {
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		for {
			fn()
			select {
			case <-done:
				return
			case <-time.After(interval):
			}
		}
	}()
	return func() { close(done); <-finished }
}

// sampler reads the service's replicas through the API throughout a
// deployment: the fewest available and the most replicas it saw.
type sampler struct {
	minAvailable, maxTotal, samples int
	stop                            func()
}

func sample(s *server, service string) *sampler {
	sm := &sampler{minAvailable: 1 << 30}
	sm.stop = every(50*time.Millisecond, func() {
		rs, err := s.api.ListReplicas(context.Background(), service)
		if err != nil {
			return
		}
		available := 0
		for _, r := range rs {
			if r.State == api.ReplicaRunning && r.Health == api.HealthHealthy && r.PreviousMachine == "" {
				available++
			}
		}
		sm.minAvailable, sm.maxTotal = min(sm.minAvailable, available), max(sm.maxTotal, len(rs))
		sm.samples++
	})
	return sm
}

func (sm *sampler) end() (minAvailable, maxTotal, samples int) {
	sm.stop()
	return sm.minAvailable, sm.maxTotal, sm.samples
}

// A good change rolls 6 replicas one at a time: never fewer than 6
// available nor more than 7 replicas, `apply --wait` follows it to the
// end; history lists both revisions; undo returns to the first; a canary
// waits for promotion; restart replaces every replica; scaling restarts
// nothing.
func TestDeploymentRollsWithinItsBounds(t *testing.T) {
	t.Parallel() // see parallelTests in helpers_test.go
	s := startServer(t, t.TempDir(), "--local-exit-with-server")
	s.apply(t, "v1.yaml", deployment(6, "v1", ""))
	waitFor(t, "6 replicas answering", func() (bool, string) { return allAnswer(s.replicas("web"), 6) })
	if out, errOut, code := s.gantry("rollout", "status", "web", "-w"); code != 0 || !strings.Contains(out, "revision 1 Complete: 6/6 updated") {
		t.Fatalf("rollout status -w of the first deployment: exit %d\n%s%s", code, out, errOut)
	}

	sm := sample(s, "web")
	out, errOut, code := s.gantry("apply", "--wait", "-f", writeFile(t, s.dataDir, "v2.yaml", deployment(6, "v2", "")))
	minAvailable, maxTotal, samples := sm.end()
	if code != 0 || !strings.Contains(out, "service/web configured") || !strings.Contains(out, "revision 2 Complete: 6/6 updated") {
		t.Fatalf("apply --wait: exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(out, "revision 2 Progressing") {
		t.Errorf("apply --wait printed no progress:\n%s", out)
	}
	t.Logf("%d samples: at least %d available, at most %d replicas", samples, minAvailable, maxTotal)
	if minAvailable < 6 || maxTotal > 7 || samples < 10 {
		t.Fatalf("the deployment left %d available (floor 6) and ran %d replicas (ceiling 7) over %d samples", minAvailable, maxTotal, samples)
	}
	waitFor(t, "6 replicas answering v2", func() (bool, string) { return allGreet(s.replicas("web"), 6, "v2") })

	out, _, _ = s.gantry("rollout", "history", "web")
	if !strings.Contains(out, "REVISION") || !strings.Contains(out, "current (Complete)") || strings.Count(out, "\n") != 3 {
		t.Fatalf("rollout history:\n%s", out)
	}
	if out, errOut, code := s.gantry("rollout", "undo", "web", "--to-revision", "1"); code != 0 || !strings.Contains(out, "rolled back") {
		t.Fatalf("rollout undo: exit %d %s%s", code, out, errOut)
	}
	if out, errOut, code := s.gantry("rollout", "status", "web", "-w"); code != 0 || !strings.Contains(out, "revision 3 Complete") {
		t.Fatalf("rollout status -w after undo: exit %d\n%s%s", code, out, errOut)
	}
	waitFor(t, "6 replicas answering v1 again", func() (bool, string) { return allGreet(s.replicas("web"), 6, "v1") })

	s.apply(t, "v3.yaml", strings.Replace(deployment(6, "v3", ""), "update: {maxSurge: 1, maxUnavailable: 0, progressDeadlineSeconds: 12}",
		"update: {canary: 1, progressDeadlineSeconds: 30}", 1))
	waitFor(t, "the canary waiting for promotion", func() (bool, string) {
		out, _, _ := s.gantry("rollout", "status", "web")
		return strings.Contains(out, "WaitingPromotion: 1/6 updated, 1 available, 6 old"), out
	})
	if out, errOut, code := s.gantry("rollout", "promote", "web"); code != 0 || !strings.Contains(out, "promoted") {
		t.Fatalf("rollout promote: exit %d %s%s", code, out, errOut)
	}
	if out, errOut, code := s.gantry("rollout", "status", "web", "-w"); code != 0 || !strings.Contains(out, "revision 4 Complete") {
		t.Fatalf("rollout status -w after promote: exit %d\n%s%s", code, out, errOut)
	}

	before := ids(s.replicas("web"))
	if out, errOut, code := s.gantry("rollout", "restart", "web"); code != 0 || !strings.Contains(out, "restarted") {
		t.Fatalf("rollout restart: exit %d %s%s", code, out, errOut)
	}
	waitFor(t, "the restart's canary waiting for promotion", func() (bool, string) {
		out, _, _ := s.gantry("rollout", "status", "web")
		return strings.Contains(out, "revision 5 WaitingPromotion"), out
	})
	if out, errOut, code := s.gantry("rollout", "promote", "web"); code != 0 {
		t.Fatalf("rollout promote: exit %d %s%s", code, out, errOut)
	}
	if out, errOut, code := s.gantry("rollout", "status", "web", "-w"); code != 0 || !strings.Contains(out, "revision 5 Complete") {
		t.Fatalf("rollout status -w after restart: exit %d\n%s%s", code, out, errOut)
	}
	after := ids(s.replicas("web"))
	for id := range after {
		if before[id] {
			t.Fatalf("replica %s survived a restart (before %v, after %v)", id, before, after)
		}
	}
	if out, errOut, code := s.gantry("scale", "service", "web", "--replicas", "4"); code != 0 || !strings.Contains(out, "scaled to 4") {
		t.Fatalf("scale: exit %d %s%s", code, out, errOut)
	}
	waitFor(t, "4 replicas, the survivors untouched", func() (bool, string) {
		rs := s.replicas("web")
		for _, r := range rs {
			if !after[r.ID] || r.Restarts != 0 {
				return false, "replica " + r.ID + " is new or restarted"
			}
		}
		return len(rs) == 4, fmt.Sprintf("%d replicas", len(rs))
	})
}

// ids are the replicas in service (a retiring one is on its way out, and
// its id may be taken again once it is gone).
func ids(rs []api.Replica) map[string]bool {
	out := map[string]bool{}
	for _, r := range rs {
		if r.RetiringSince == nil {
			out[r.ID] = true
		}
	}
	return out
}

// allGreet: n replicas answer with the greeting.
func allGreet(rs []api.Replica, n int, greeting string) (bool, string) {
	if ok, why := allAnswer(rs, n); !ok {
		return false, why
	}
	for _, r := range rs {
		if body, _ := answers(r); !strings.HasPrefix(body, greeting+" ") {
			return false, r.ID + " answers " + body
		}
	}
	return true, ""
}

// Broken revisions applied to a serving service — a crash loop, a failing
// health check, a process that never serves, replicas that cannot be
// placed — each fail, `apply --wait` says so and exits 1 (at once for
// what can never be placed, as Nomad does), and the service returns to its
// good revision; the old replicas answer HTTP throughout
// (a client polls them: no failure) and are never replaced.
func TestBrokenRevisionsAreRevertedWhileServing(t *testing.T) {
	t.Parallel() // see parallelTests in helpers_test.go
	s := startServer(t, t.TempDir(), "--local-exit-with-server")
	s.apply(t, "good.yaml", deployment(3, "good", ""))
	serving := settledReplicas(t, s, "web", 3)
	poll := pollAll(serving)
	// What can never run is refused at apply, with the field named.
	huge := writeFile(t, s.dataDir, "huge.yaml", strings.Replace(deployment(3, "good", ""), "cpu: 100m", `cpu: "100"`, 1))
	if _, errOut, code := s.gantry("apply", "-f", huge); code != 1 || !strings.Contains(errOut, "spec.resources.cpu: one replica asks more than any machine") {
		t.Fatalf("apply of a replica larger than any machine: exit %d %s", code, errOut)
	}
	const reverted = "the service is back on revision"
	broken := []struct{ name, spec, want, wantToo string }{
		{"crash loop", strings.Replace(deployment(3, "good", ""), "command: [gantry, hello]", "command: [gantry, hello, --no-such-flag]", 1), "crashed", reverted},
		{"failing health check", strings.Replace(deployment(3, "good", ""), "http: {port: http, path: /healthz}", "tcp: {port: admin}", 1), "health check: dial tcp", reverted},
		{"never serves", strings.Replace(deployment(3, "good", ""), "command: [gantry, hello]", `command: [sleep, "3600"]`, 1), "health check: Get", reverted},
		{"unplaceable", deployment(3, "good", "  placement: {nodeSelector: {disk: nvme}}\n"), "can never be placed as the spec stands: ", "fails at its progress deadline"},
	}
	for i, b := range broken {
		out, errOut, code := s.gantry("apply", "--wait", "-f", writeFile(t, s.dataDir, fmt.Sprintf("bad%d.yaml", i), b.spec))
		if code != 1 || !strings.Contains(errOut, b.want) || !strings.Contains(errOut, b.wantToo) {
			t.Fatalf("%s: apply --wait exit %d\n%s%s", b.name, code, out, errOut)
		}
		waitFor(t, b.name+": the good revision complete again", func() (bool, string) {
			out, _, _ := s.gantry("rollout", "status", "web")
			return strings.Contains(out, "Complete: 3/3 updated"), out
		})
		t.Logf("%s: %s", b.name, strings.TrimSpace(errOut))
	}
	failures, requests := poll.end()
	if failures != 0 || requests < 50 {
		t.Fatalf("the old replicas failed %d of %d requests", failures, requests)
	}
	now := s.replicas("web")
	for i, r := range now {
		if r.ID != serving[i].ID || r.Restarts != 0 || r.Machine != serving[i].Machine {
			t.Fatalf("old replica %s was replaced or restarted: %+v", serving[i].ID, r)
		}
	}
	out, _, _ := s.gantry("get", "events")
	if !strings.Contains(out, "DeploymentFailed") || !strings.Contains(out, "DeploymentReverted") {
		t.Fatalf("no events say what happened:\n%s", out)
	}
	out, _, _ = s.gantry("rollout", "history", "web")
	if strings.Count(out, "failed:") != 4 {
		t.Fatalf("rollout history does not mark the 4 failed revisions:\n%s", out)
	}
}

// poller GETs every replica of a list in turn until ended, counting
// failures.
type poller struct {
	failures, requests int
	stop               func()
}

func pollAll(rs []api.Replica) *poller {
	p := &poller{}
	p.stop = every(20*time.Millisecond, func() {
		for _, r := range rs {
			if _, ok := answers(r); !ok {
				p.failures++
			}
			p.requests++
		}
	})
	return p
}

func (p *poller) end() (failures, requests int) {
	p.stop()
	return p.failures, p.requests
}

// A server killed with SIGKILL mid-deployment resumes it when it starts
// again: the deployment completes within its bounds.
func TestDeploymentResumesAfterServerKill(t *testing.T) {
	t.Parallel() // see parallelTests in helpers_test.go
	dir := t.TempDir()
	s := startServer(t, dir)
	slow := "  update: {maxSurge: 1, maxUnavailable: 0, minHealthySeconds: 2, progressDeadlineSeconds: 60}\n"
	spec := func(greeting string) string {
		return strings.Replace(deployment(3, greeting, ""), "  update: {maxSurge: 1, maxUnavailable: 0, progressDeadlineSeconds: 12}\n", slow, 1)
	}
	s.apply(t, "v1.yaml", spec("v1"))
	settledReplicas(t, s, "web", 3)
	s.apply(t, "v2.yaml", spec("v2"))
	waitFor(t, "the deployment half way", func() (bool, string) {
		ro, err := s.api.Rollout(context.Background(), "web")
		if err != nil || ro.Deployment == nil {
			return false, fmt.Sprint(err)
		}
		d := ro.Deployment
		return d.Number == 2 && d.Available >= 1 && d.Old >= 1, fmt.Sprintf("%+v", *d)
	})
	s.kill()
	s2 := startServer(t, dir, "--listen", hostPort(s.url))
	if out, errOut, code := s2.gantry("rollout", "status", "web", "-w"); code != 0 || !strings.Contains(out, "revision 2 Complete: 3/3 updated") {
		t.Fatalf("rollout status -w after the restart: exit %d\n%s%s", code, out, errOut)
	}
	waitFor(t, "3 replicas answering v2", func() (bool, string) { return allGreet(s2.replicas("web"), 3, "v2") })
}
