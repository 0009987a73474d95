package e2e

import (
	"encoding/json"
	"fmt"
	"github.com/miekg/dns"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
)

const webSpec = `kind: Cluster
metadata: {name: e2e}
spec:
  capacityGroups:
    - groupId: general
      instanceType: local.medium
      minSize: 2
      maxSize: 3
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
  healthCheck:
    http: {port: http, path: /healthz}
    intervalSeconds: 1
  placement:
    spread: [{key: machine, maxSkew: 1}]
`

// A machine process is killed: its replicas come back on other machines
// and answer HTTP, and the lost machine is replaced.
func TestMachineLossReschedulesReplicas(t *testing.T) {
	t.Parallel() // see parallelTests in helpers_test.go
	s := startWeb(t)
	victim := busiestMachine(s.replicas("web"))
	victimInstance := instanceOf(t, s.dataDir, victim)
	t.Logf("killing machine %s (pid %d)", victim, victimInstance.PID)
	if err := syscall.Kill(-victimInstance.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "replicas running off the killed machine", func() (bool, string) {
		rs := s.replicas("web")
		for _, r := range rs {
			if r.Machine == victim {
				return false, r.ID + " still on " + victim
			}
		}
		return allAnswer(rs, 3)
	})
	waitFor(t, "the lost machine terminated and replaced", func() (bool, string) {
		joined := 0
		for _, m := range s.machines() {
			if m.ID == victim {
				return false, "victim still live: " + string(m.FleetState)
			}
			if m.JoinState == api.JoinJoined {
				joined++
			}
		}
		return joined >= 2, "joined machines: " + itoa(joined)
	})
	events, _, _ := s.gantry("get", "events")
	if !strings.Contains(events, "no heartbeat") {
		t.Errorf("no event says why the machine was replaced:\n%s", events)
	}
}

func busiestMachine(rs []api.Replica) string {
	count := map[string]int{}
	best := ""
	for _, r := range rs {
		count[r.Machine]++
		if best == "" || count[r.Machine] > count[best] {
			best = r.Machine
		}
	}
	return best
}

// The server is killed: agents keep their replicas serving; a new server
// on the same state adopts the same machines and replicas, launching
// nothing new and restarting nothing.
func TestAgentsKeepServingWhileServerIsDown(t *testing.T) {
	t.Parallel() // see parallelTests in helpers_test.go
	dir := t.TempDir()
	s := startServer(t, dir)
	spec := writeFile(t, dir, "web.yaml", webSpec)
	if _, errOut, code := s.gantry("apply", "-f", spec); code != 0 {
		t.Fatalf("apply: %s", errOut)
	}
	waitFor(t, "3 replicas answering HTTP", func() (bool, string) { return allAnswer(s.replicas("web"), 3) })
	before := settledReplicas(t, s, "web", 3)
	machinesBefore := s.machines()

	s.kill()
	waitFor(t, "every agent missing several heartbeats", func() (bool, string) {
		for _, m := range machinesBefore {
			if n := agentLogCount(dir, m.ProviderID, "heartbeat failed"); n < 3 {
				return false, fmt.Sprintf("%s missed %d", m.ID, n)
			}
		}
		return true, ""
	})
	for _, r := range before {
		if body, ok := answers(r); !ok {
			t.Fatalf("%s stopped answering while the server was down: %q", r.ID, body)
		}
	}

	s2 := startServer(t, dir, "--listen", hostPort(s.url)) // agents know this address
	waitFor(t, "replicas reported again by the same machines", func() (bool, string) {
		after := s2.replicas("web")
		if ok, why := allAnswer(after, 3); !ok {
			return false, why
		}
		for i, r := range after {
			if r.Machine != before[i].Machine || r.HostPorts["http"] != before[i].HostPorts["http"] || r.Restarts != 0 {
				return false, fmt.Sprintf("replica %s moved or restarted: machine %s (was %s), port %d (was %d), %d restarts",
					r.ID, r.Machine, before[i].Machine, r.HostPorts["http"], before[i].HostPorts["http"], r.Restarts)
			}
		}
		return true, ""
	})
	waitPasses(t, s2.dataDir, s2.url, 10) // still nothing replaced
	machinesAfter := s2.machines()
	if len(machinesAfter) != len(machinesBefore) {
		t.Fatalf("machines before %d, after restart %d", len(machinesBefore), len(machinesAfter))
	}
	for i := range machinesAfter {
		if machinesAfter[i].ID != machinesBefore[i].ID || machinesAfter[i].FleetState == api.FleetTerminating {
			t.Fatalf("machine %s not adopted as it was: %+v", machinesBefore[i].ID, machinesAfter[i])
		}
	}
}

// The CLI in kubectl's habits: output formats, describe, validate and
// delete, with one-line errors and non-zero exits.
func TestCLI(t *testing.T) {
	t.Parallel() // see parallelTests in helpers_test.go
	dir := t.TempDir()
	s := startServer(t, dir, "--local-exit-with-server")
	bad := writeFile(t, dir, "bad.yaml", strings.Replace(webSpec, "cpu: 500m", "cpu: lots", 1))
	_, errOut, code := runGantry(t, "validate", "-f", bad)
	if code == 0 || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.Contains(errOut, "document 2: spec.resources.cpu") {
		t.Fatalf("validate of a bad file: exit %d, stderr %q", code, errOut)
	}
	good := writeFile(t, dir, "web.yaml", webSpec)
	if out, _, code := runGantry(t, "validate", "-f", good); code != 0 || !strings.Contains(out, "service/web is valid") {
		t.Fatalf("validate good: %d %s", code, out)
	}
	if _, errOut, code := s.gantry("apply", "-f", bad); code == 0 || !strings.Contains(errOut, "spec.resources.cpu") {
		t.Fatalf("apply bad: %d %s", code, errOut)
	}
	if out, errOut, code := s.gantry("apply", "-f", good); code != 0 || !strings.Contains(out, "service/web created") {
		t.Fatalf("apply: %d %s %s", code, out, errOut)
	}
	waitFor(t, "3 replicas answering HTTP", func() (bool, string) { return allAnswer(s.replicas("web"), 3) })

	// A spread repair may still move a replica (new copy first) while the
	// last machine joins: the counts are read until they say 3.
	var out string
	waitFor(t, "get replicas -o wide: 3 running", func() (bool, string) {
		var code int
		out, _, code = s.gantry("get", "replicas", "-o", "wide")
		return code == 0 && strings.Contains(out, "SPEC") && strings.Count(out, "running") == 3, out
	})
	waitFor(t, "get service -o json: 3 running", func() (bool, string) {
		out, _, _ = s.gantry("get", "services", "web", "-o", "json")
		var svc api.Service
		if err := json.Unmarshal([]byte(out), &svc); err != nil || svc.Status == nil {
			return false, fmt.Sprintf("%v\n%s", err, out)
		}
		return svc.Status.Running == 3, fmt.Sprintf("%d running", svc.Status.Running)
	})
	out, _, _ = s.gantry("get", "clusters", "-o", "yaml")
	if !strings.Contains(out, "groupId: general") {
		t.Fatalf("get clusters -o yaml:\n%s", out)
	}
	out, _, _ = s.gantry("describe", "service", "web")
	if !strings.Contains(out, "Replicas") || !strings.Contains(out, "Applied") || !strings.Contains(out, "service/web revision 1 ") || !strings.Contains(out, "REVISION") {
		t.Fatalf("describe service:\n%s", out)
	}
	// Logs of a process replica, relayed from its agent.
	if out, errOut, code := s.gantry("logs", "web-0", "--tail", "1"); code != 0 || !strings.HasPrefix(out, "hello listening on") || strings.Count(out, "\n") != 1 {
		t.Fatalf("gantry logs web-0 --tail 1: exit %d %q %s", code, out, errOut)
	}
	if _, errOut, code := s.gantry("logs", "web-0", "--tail", "x"); code == 0 || !strings.Contains(errOut, "--tail") {
		t.Fatalf("gantry logs --tail x: exit %d %s", code, errOut)
	}
	if _, errOut, code := s.gantry("get", "pods"); code != 1 || !strings.Contains(errOut, `unknown resource type "pods"`) {
		t.Fatalf("get pods: %d %s", code, errOut)
	}
	if _, errOut, code := s.gantry("delete", "cluster", "e2e"); code != 1 || !strings.Contains(errOut, "still runs service") {
		t.Fatalf("delete busy cluster: %d %s", code, errOut)
	}
	urls := s.replicas("web")
	if out, errOut, code := s.gantry("delete", "service", "web"); code != 0 || !strings.Contains(out, "service/web deleted") {
		t.Fatalf("delete service: %d %s %s", code, out, errOut)
	}
	waitFor(t, "deleted service's replicas to stop answering", func() (bool, string) {
		for _, r := range urls {
			if _, ok := answers(r); ok {
				return false, r.ID + " still answers"
			}
		}
		return true, ""
	})
}

// The README's main command: `gantry dev -f examples/hello.yaml` brings up
// replicas that answer, and Ctrl-C leaves no process behind.
func TestDevRunsTheExampleAndCleansUp(t *testing.T) {
	t.Parallel() // see parallelTests in helpers_test.go
	dir := filepath.Join(t.TempDir(), "state")
	for run := 1; run <= 2; run++ { // the second run starts from the first's state
		runDevOnce(t, dir, run, "hello from Gantry", "-f", "../examples/hello.yaml")
	}
}

// runDevOnce runs `gantry dev` with args until its replicas answer with
// greeting, then Ctrl-C; nothing of it may be left running.
func runDevOnce(t *testing.T, dir string, run int, greeting string, args ...string) {
	t.Helper()
	cmd := gantryCommand(append([]string{"dev", "--data-dir", dir, "--listen", "127.0.0.1:0"}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		killMachines(dir)
	})
	lines := linesOf(stdout)
	var urls []string
	var transcript strings.Builder
	deadline := time.After(waitLimit)
	nameLine := regexp.MustCompile(`^Name (\S+) answered at (\S+) `)
	var name, resolver string
	for ready := false; !ready || len(urls) < 3 || resolver == ""; {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("run %d: gantry dev exited early:\n%s", run, transcript.String())
			}
			transcript.WriteString(line + "\n")
			if strings.HasPrefix(line, "All replicas are running") {
				ready = true
			}
			if ready && strings.HasPrefix(line, "hello-") {
				fields := strings.Fields(line)
				urls = append(urls, fields[len(fields)-1])
			}
			if m := nameLine.FindStringSubmatch(line); m != nil {
				name, resolver = m[1], m[2]
			}
		case <-deadline:
			t.Fatalf("run %d: replicas not running:\n%s", run, transcript.String())
		}
	}
	for _, u := range urls {
		body, ok := get(u)
		if !ok || !strings.Contains(body, greeting) {
			t.Fatalf("run %d: %s answered %q", run, u, body)
		}
	}
	// The resolver it prints answers from this host (a machine
	// container's loopback would not).
	waitFor(t, "the printed resolver "+resolver+" answering "+name, func() (bool, string) {
		m := new(dns.Msg)
		m.SetQuestion(name, dns.TypeA)
		resp, _, err := (&dns.Client{Timeout: 2 * time.Second}).Exchange(m, resolver)
		if err != nil {
			return false, err.Error()
		}
		return len(resp.Answer) == 3, resp.String()
	})
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	rest, _ := io.ReadAll(chanReader(lines))
	if err := cmd.Wait(); err != nil {
		t.Fatalf("run %d: gantry dev after Ctrl-C: %v\n%s%s", run, err, transcript.String(), rest)
	}
	t.Logf("run %d: gantry dev exited %s after Ctrl-C", run, time.Since(stopped).Round(time.Millisecond))
	if !strings.Contains(string(rest), "stopping machine ") || !regexp.MustCompile(`Stopped [1-9][0-9]* machine\(s\)`).Match(rest) {
		t.Fatalf("run %d: gantry dev does not say what it stops:\n%s", run, rest)
	}
	waitFor(t, "no process left from the dev run", func() (bool, string) {
		pids := processesMentioning(dir)
		return len(pids) == 0, "still running: " + itoa(len(pids))
	})
}

func chanReader(lines <-chan string) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		for l := range lines {
			_, _ = pw.Write([]byte(l + "\n"))
		}
		pw.Close()
	}()
	return pr
}

func itoa(n int) string { return strconv.Itoa(n) }

// settledReplicas waits until a service's n replicas answer and stay where
// they are over a few control-loop passes (a spread repair may still move
// one after the last machine joined), and returns them.
func settledReplicas(t *testing.T, s *server, service string, n int) []api.Replica {
	t.Helper()
	var settled []api.Replica
	waitFor(t, service+" settled", func() (bool, string) {
		first := s.replicas(service)
		if ok, why := allAnswer(first, n); !ok {
			return false, why
		}
		waitPasses(t, s.dataDir, s.url, 3)
		second := s.replicas(service)
		for i := range first {
			if i >= len(second) || second[i].Machine != first[i].Machine || second[i].HostPorts["http"] != first[i].HostPorts["http"] {
				return false, "replicas still moving"
			}
		}
		settled = second
		return true, ""
	})
	return settled
}
