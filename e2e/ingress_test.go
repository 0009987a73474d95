package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
)

// needHAProxy finds HAProxy (scripts/test.sh installs it); on CI its
// absence is a failure.
func needHAProxy(t *testing.T) {
	t.Helper()
	if os.Getenv("GANTRY_HAPROXY") != "" {
		return
	}
	if _, err := exec.LookPath("haproxy"); err == nil {
		return
	}
	if _, err := os.Stat("/usr/sbin/haproxy"); err == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("HAProxy is not installed: scripts/test.sh installs it (./scripts/haproxy-up.sh)")
	}
	t.Skip("HAProxy is not installed (./scripts/haproxy-up.sh)")
}

func freeTCPPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// ingressClient sends a request every interval through an exposed port,
// as a browser or a load generator would (keep-alive connections).
type ingressClient struct {
	url        string
	client     *http.Client
	mu         sync.Mutex
	ok, failed int
	failures   []string
	bodies     map[string]int
}

func newIngressClient(url string) *ingressClient {
	return &ingressClient{url: url, client: &http.Client{Timeout: 5 * time.Second}, bodies: map[string]int{}}
}

func (c *ingressClient) send() {
	resp, err := c.client.Get(c.url)
	why := ""
	body := ""
	if err != nil {
		why = err.Error()
	} else {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
		if resp.StatusCode != http.StatusOK {
			why = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, body)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if why == "" {
		c.ok++
		c.bodies[strings.Fields(body + " ?")[0]]++
		return
	}
	c.failed++
	if len(c.failures) < 10 {
		c.failures = append(c.failures, time.Now().Format("15:04:05.000")+" "+why)
	}
}

func edgeSpec(replicas int, greeting string, port int, extra string) string {
	return strings.Replace(deployment(replicas, greeting, fmt.Sprintf("  expose: [{port: %d}]\n  placement: {capacityGroups: [general]}\n%s", port, extra)),
		"    - {groupId: general, instanceType: local.medium, minSize: 2, maxSize: 3}",
		"    - {groupId: general, instanceType: local.medium, minSize: 2, maxSize: 3}\n    - {groupId: edge, role: edge, instanceType: local.small, minSize: 1, maxSize: 1}", 1)
}

// ingressSpec is deploySpec with an edge group (its machine serves the
// exposed port, and runs no replica) and web exposed on port; a step of
// a deployment may take longer than deploySpec's 12 s on a loaded host
// (each old replica drains 3 s).
func ingressSpec(replicas int, greeting string, port int, extra string) string {
	return strings.Replace(edgeSpec(replicas, greeting, port, extra), "progressDeadlineSeconds: 12", "progressDeadlineSeconds: 30", 1)
}

// A client sending a request every 10 ms through an exposed port (HAProxy
// on the edge machine) sees no failure through a rolling deployment of 6
// replicas, a broken revision that is reverted, a scale from 6 to 2 and
// the drain of a machine that runs one of them: a replica leaves the
// proxy before it stops, and enters once it serves.
func TestIngressServesThroughDeploymentRevertScaleAndDrain(t *testing.T) {
	needHAProxy(t)
	s := startServer(t, t.TempDir(), "--local-exit-with-server")
	port := freeTCPPort(t)
	s.apply(t, "v1.yaml", ingressSpec(6, "v1", port, ""))
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	c := newIngressClient(url)
	t.Cleanup(func() {
		if t.Failed() {
			logEdgeAgents(t, s.dataDir)
			out, _, _ := s.gantry("get", "events")
			t.Logf("events:\n%s", out)
		}
	})
	waitFor(t, "the exposed port answering v1 from 6 replicas", func() (bool, string) {
		if ok, why := allAnswer(s.replicas("web"), 6); !ok {
			return false, why
		}
		c.send()
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.ok > 0, strings.Join(c.failures, "; ")
	})
	c = newIngressClient(url)
	stop := sync.OnceFunc(every(10*time.Millisecond, c.send))
	defer stop()
	step := func(what string, args ...string) (string, int) {
		out, errOut, code := s.gantry(args...)
		t.Logf("%s: exit %d", what, code)
		return out + errOut, code
	}
	if out, code := step("rolling deployment", "apply", "--wait", "-f", writeFile(t, s.dataDir, "v2.yaml", ingressSpec(6, "v2", port, ""))); code != 0 {
		t.Fatalf("apply --wait v2: %s", out)
	}
	broken := strings.Replace(ingressSpec(6, "v2", port, ""), "command: [gantry, hello]", "command: [gantry, hello, --no-such-flag]", 1)
	if out, code := step("broken revision", "apply", "--wait", "-f", writeFile(t, s.dataDir, "broken.yaml", broken)); code != 1 || !strings.Contains(out, "the service is back on revision") {
		t.Fatalf("apply --wait of a crash loop: exit %d %s", code, out)
	}
	if out, code := step("scale 6 to 2", "scale", "service", "web", "--replicas", "2"); code != 0 {
		t.Fatalf("scale: %s", out)
	}
	waitFor(t, "2 replicas left", func() (bool, string) {
		rs := s.replicas("web")
		return len(rs) == 2, fmt.Sprintf("%d replicas", len(rs))
	})
	drained := ""
	for _, r := range s.replicas("web") {
		m, err := s.api.GetMachine(context.Background(), r.Machine)
		if err == nil && m.Group == "general" {
			drained = m.ID
		}
	}
	if drained == "" {
		t.Fatal("no replica on a general machine to drain")
	}
	if out, code := step("drain "+drained, "drain", drained, "--wait"); code != 0 {
		t.Fatalf("drain: %s", out)
	}
	stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	t.Logf("%d requests answered (%v), %d failed", c.ok, c.bodies, c.failed)
	if c.failed > 0 || c.ok < 500 {
		t.Fatalf("%d of %d requests failed (want 0 of at least 500): %v", c.failed, c.ok+c.failed, c.failures)
	}
	if c.bodies["v2"] == 0 {
		t.Fatalf("no answer from v2 through the exposed port: %v", c.bodies)
	}
}

// logEdgeAgents prints the end of the edge machines' agent and HAProxy
// logs.
func logEdgeAgents(t *testing.T, dataDir string) {
	paths, _ := filepath.Glob(filepath.Join(dataDir, "local", "machines", "*", "agent.log"))
	more, _ := filepath.Glob(filepath.Join(dataDir, "local", "machines", "*", "*", "ingress", "haproxy.log"))
	for _, p := range append(paths, more...) {
		data, _ := os.ReadFile(p)
		if strings.Contains(p, "haproxy.log") || strings.Contains(string(data), "ingress") || strings.Contains(string(data), "HAProxy") {
			lines := strings.Split(strings.TrimSpace(string(data)), "\n")
			t.Logf("%s:\n%s", p, strings.Join(lines[max(0, len(lines)-30):], "\n"))
		}
	}
}

// A canary with canaryWeight 10 takes 10% ± 3% of 2,000 requests through
// the exposed port while it waits for promotion; once promoted, the new
// revision takes them all.
func TestIngressSendsTheCanaryItsWeight(t *testing.T) {
	needHAProxy(t)
	s := startServer(t, t.TempDir(), "--local-exit-with-server")
	t.Cleanup(func() {
		if t.Failed() {
			logEdgeAgents(t, s.dataDir)
		}
	})
	port := freeTCPPort(t)
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	s.apply(t, "v1.yaml", edgeSpec(4, "v1", port, ""))
	waitFor(t, "4 replicas of v1 behind the exposed port", func() (bool, string) {
		if ok, why := allAnswer(s.replicas("web"), 4); !ok {
			return false, why
		}
		c := newIngressClient(url)
		c.send()
		return c.ok == 1, strings.Join(c.failures, "")
	})
	canary := strings.Replace(edgeSpec(4, "v2", port, ""), "update: {maxSurge: 1, maxUnavailable: 0, progressDeadlineSeconds: 12}",
		"update: {canary: 1, canaryWeight: 10, progressDeadlineSeconds: 120}", 1)
	s.apply(t, "v2.yaml", canary)
	waitFor(t, "the canary serving behind the exposed port", func() (bool, string) {
		out, _, _ := s.gantry("rollout", "status", "web")
		if !strings.Contains(out, "WaitingPromotion: 1/4 updated, 1 available, 4 old") {
			return false, out
		}
		c := newIngressClient(url)
		for range 50 {
			c.send()
		}
		return c.bodies["v2"] > 0, fmt.Sprint(c.bodies)
	})
	c := newIngressClient(url)
	for range 2000 {
		c.send()
	}
	share := float64(c.bodies["v2"]) / 2000
	t.Logf("the canary answered %d of 2000 requests (%.1f%%): %v", c.bodies["v2"], 100*share, c.bodies)
	if c.failed > 0 || share < 0.07 || share > 0.13 {
		t.Fatalf("canary share %.3f with %d failures %v, want 10%% ± 3%% and none", share, c.failed, c.failures)
	}
	if out, errOut, code := s.gantry("rollout", "promote", "web"); code != 0 {
		t.Fatalf("rollout promote: exit %d %s%s", code, out, errOut)
	}
	if out, errOut, code := s.gantry("rollout", "status", "web", "-w"); code != 0 || !strings.Contains(out, "Complete") {
		t.Fatalf("rollout status -w after promote: exit %d\n%s%s", code, out, errOut)
	}
	waitFor(t, "v2 answering every request through the exposed port", func() (bool, string) {
		c := newIngressClient(url)
		for range 100 {
			c.send()
		}
		return c.bodies["v2"] == 100, fmt.Sprint(c.bodies)
	})
}

// An edge machine whose HAProxy cannot take an exposed port (another
// program holds it) says so in its IngressReady condition, and serves
// it once the port is free.
func TestIngressReportsAPortItCannotTake(t *testing.T) {
	t.Parallel() // see parallelTests in helpers_test.go
	needHAProxy(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := taken.Addr().(*net.TCPAddr).Port
	s := startServer(t, t.TempDir(), "--local-exit-with-server")
	s.apply(t, "web.yaml", edgeSpec(1, "v1", port, ""))
	edge := func() (api.Condition, string) {
		machines, err := s.api.ListMachines(context.Background(), "")
		for _, m := range machines {
			if m.Group == "edge" && m.Live() {
				for _, c := range m.Conditions {
					if c.Type == api.ConditionIngressReady {
						return c, ""
					}
				}
				return api.Condition{}, fmt.Sprintf("%s: %+v", m.ID, m.Conditions)
			}
		}
		return api.Condition{}, fmt.Sprint("no edge machine ", err)
	}
	waitFor(t, "IngressReady False on the edge machine", func() (bool, string) {
		c, why := edge()
		return c.Status == "False" && c.Reason == "ProxyFailed", fmt.Sprintf("%+v %s", c, why)
	})
	c, _ := edge()
	t.Logf("IngressReady: %s %s: %s", c.Status, c.Reason, c.Message)
	taken.Close()
	waitFor(t, "IngressReady True once the port is free", func() (bool, string) {
		c, why := edge()
		return c.Status == "True", fmt.Sprintf("%+v %s", c, why)
	})
	waitFor(t, "the port answering", func() (bool, string) {
		body, ok := get(fmt.Sprintf("http://127.0.0.1:%d/", port))
		return ok && strings.HasPrefix(body, "v1"), body
	})
}
