package server

import (
	"context"
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
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if !rcv.WaitFor(ctx, func() bool {
		return strings.Contains(strings.Join(rcv.Metrics(), " "), "gantry_reconcile_duration_seconds")
	}) {
		t.Fatalf("no server metrics over OTLP: %v", rcv.Metrics())
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
	missing := func() []string {
		seen := map[string]bool{}
		for _, sp := range rcv.Spans() {
			seen[sp.Name] = true
		}
		var out []string
		for _, n := range names {
			if !seen[n] {
				out = append(out, n)
			}
		}
		return out
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if !rcv.WaitFor(ctx, func() bool { return len(missing()) == 0 }) {
		t.Fatalf("spans missing: %v", missing())
	}
}
