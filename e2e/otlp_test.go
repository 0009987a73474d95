package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/internal/otlptest"
	"github.com/gantry-dev/gantry/telemetry"
)

const otlpToken = "otlp-e2e-secret-7c1f09"

// otlpSpec: cluster "seen" exports to the test's receiver; cluster
// "dark" to a port nothing listens on. Each runs one chatty replica.
const otlpSpec = `kind: Cluster
metadata: {name: seen}
spec:
  capacityGroups:
    - {groupId: general, instanceType: local.small, minSize: 1, maxSize: 1}
  systemReserved: {cpu: 100m, memory: 128Mi}
  monitoring:
    otlpLogsEndpoint: RECEIVER
    otlpMetricsEndpoint: RECEIVER
    headers: [{name: Authorization, secretRef: {env: GANTRY_E2E_OTLP_TOKEN}}]
---
kind: Cluster
metadata: {name: dark}
spec:
  capacityGroups:
    - {groupId: general, instanceType: local.small, minSize: 1, maxSize: 1}
  systemReserved: {cpu: 100m, memory: 128Mi}
  monitoring:
    otlpLogsEndpoint: DEAD
    headers: [{name: Authorization, secretRef: {env: GANTRY_E2E_OTLP_TOKEN}}]
---
kind: Service
metadata: {name: chatty}
spec:
  cluster: seen
  command: [sh, -c, 'i=0; while true; do echo "chatty line $i"; i=$((i+1)); sleep 0.05; done']
  replicas: 1
  resources: {cpu: 100m, memory: 64Mi}
---
kind: Service
metadata: {name: muted}
spec:
  cluster: dark
  command: [sh, -c, 'i=0; while true; do echo "muted line $i"; i=$((i+1)); sleep 0.01; done']
  replicas: 1
  resources: {cpu: 100m, memory: 64Mi}
`

// TestAgentsExportOverOTLP runs a server whose clusters name monitoring
// endpoints: replicas' output and the agents' own logs and metrics reach
// the receiver with their attributes and the secret header; a dead
// endpoint costs its replica nothing; the secret is in no log.
func TestAgentsExportOverOTLP(t *testing.T) {
	rcv, err := otlptest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.Close()
	t.Setenv("GANTRY_E2E_OTLP_TOKEN", otlpToken)
	s := startServer(t, t.TempDir(), "--local-exit-with-server")
	spec := strings.ReplaceAll(otlpSpec, "RECEIVER", rcv.URL)
	s.apply(t, "otlp.yaml", strings.ReplaceAll(spec, "DEAD", "http://127.0.0.1:1"))

	waitFor(t, "the chatty replica's output at the receiver", func() (bool, string) {
		for _, r := range rcv.Logs() {
			if strings.HasPrefix(r.Body, "chatty line ") && r.Resource[telemetry.AttrReplica] != "" {
				return true, ""
			}
		}
		return false, "records: " + itoa(len(rcv.Logs()))
	})
	chatty := s.replicas("chatty")[0]
	var sawOwn bool
	for _, r := range rcv.Logs() {
		if strings.HasPrefix(r.Body, "chatty line ") {
			for key, want := range map[string]string{telemetry.AttrCluster: "seen", telemetry.AttrGroup: "general", telemetry.AttrMachine: chatty.Machine,
				telemetry.AttrService: "chatty", telemetry.AttrReplica: chatty.ID, telemetry.AttrRevision: chatty.SpecHash} {
				if r.Resource[key] != want {
					t.Fatalf("record %q: resource %s = %q, want %q", r.Body, key, r.Resource[key], want)
				}
			}
		}
		if strings.Contains(r.Body, "starting replica") && r.Resource[telemetry.AttrMachine] == chatty.Machine {
			sawOwn = true
		}
		if strings.HasPrefix(r.Body, "muted line") {
			t.Fatal("the dark cluster's output reached the receiver")
		}
	}
	if !sawOwn {
		t.Error("the agent's own log records did not arrive")
	}
	waitFor(t, "the agent's metrics", func() (bool, string) {
		names := strings.Join(rcv.Metrics(), " ")
		return strings.Contains(names, "gantry.agent.replicas") && strings.Contains(names, "gantry.agent.heartbeats"), names
	})
	for _, h := range rcv.Headers() {
		if h.Get("Authorization") != otlpToken {
			t.Fatalf("a request came without the secret header: %v", h)
		}
	}

	// The dead endpoint: its replica runs on, unrestarted, writing all
	// along (a line every 10 ms: 300 lines in 3 s unless it is held up).
	waitFor(t, "the muted replica past line 300", func() (bool, string) {
		out, _, _ := s.gantry("logs", s.replicas("muted")[0].ID, "--tail", "1")
		var n int
		_, err := fmt.Sscanf(strings.TrimSpace(out), "muted line %d", &n)
		return err == nil && n > 300, out
	})
	if muted := s.replicas("muted")[0]; muted.State != "running" || muted.Restarts != 0 {
		t.Fatalf("the replica whose logs go nowhere: %s, %d restarts", muted.State, muted.Restarts)
	}

	s.kill() // the agents exit with it: every log below is complete

	var leaks []string
	_ = filepath.Walk(s.dataDir, func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() || filepath.Base(path) == "credential.json" {
			return nil // the credential file holds the header for the agent, 0600
		}
		if data, err := os.ReadFile(path); err == nil && strings.Contains(string(data), otlpToken) {
			leaks = append(leaks, path)
		}
		return nil
	})
	if strings.Contains(s.log.String(), otlpToken) {
		leaks = append(leaks, "the server's log")
	}
	if len(leaks) > 0 {
		t.Fatalf("the header secret is in %v", leaks)
	}
}
