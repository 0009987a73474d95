package server

import (
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/internal/otlptest"
)

// TestServerExportsTracesAndMetrics: with --otlp-endpoint the control
// loop's passes, decisions and provider calls arrive as spans, and the
// server's Prometheus metrics as OTLP metrics.
func TestServerExportsTracesAndMetrics(t *testing.T) {
	rcv, err := otlptest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.Close()
	withTestCluster(t, func(c *Config) {
		c.Telemetry.Endpoint, c.Telemetry.MetricInterval, c.Name = rcv.URL, 100*time.Millisecond, "server-a"
	})
	waitForSpans(t, rcv, "gantry.pass", "gantry.decide", "gantry.act", "gantry.provider.list")
	for _, sp := range rcv.Spans() {
		if sp.Resource["service.name"] != "gantry-server" || sp.Resource["service.instance.id"] != "server-a" {
			t.Fatalf("span %s: resource %v", sp.Name, sp.Resource)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(strings.Join(rcv.Metrics(), " "), "gantry_reconcile_duration_seconds") {
		if time.Now().After(deadline) {
			t.Fatalf("no server metrics over OTLP: %v", rcv.Metrics())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestServerHonoursOTELEnvironment: without the flag, the standard
// variables point the export and name the service.
func TestServerHonoursOTELEnvironment(t *testing.T) {
	rcv, err := otlptest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.URL)
	t.Setenv("OTEL_SERVICE_NAME", "gantry-east")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	startServer(t, nil)
	waitForSpans(t, rcv, "gantry.pass")
	if got := rcv.Spans()[0].Resource["service.name"]; got != "gantry-east" {
		t.Fatalf("service.name %q, want OTEL_SERVICE_NAME's", got)
	}
}

func waitForSpans(t *testing.T, rcv *otlptest.Receiver, names ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		seen := map[string]bool{}
		for _, sp := range rcv.Spans() {
			seen[sp.Name] = true
		}
		missing := []string{}
		for _, n := range names {
			if !seen[n] {
				missing = append(missing, n)
			}
		}
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("spans missing: %v (seen %v)", missing, seen)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
