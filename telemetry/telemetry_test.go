package telemetry

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	otellog "go.opentelemetry.io/otel/log"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/internal/otlptest"
)

const secret = "Bearer s3cr3t-otlp-token"

// syncBuffer is a log sink several goroutines write.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func fastConfig() AgentConfig {
	cfg := DefaultAgentConfig()
	cfg.Queue.FlushInterval, cfg.Queue.ExportTimeout, cfg.MetricInterval = 50*time.Millisecond, time.Second, 100*time.Millisecond
	return cfg
}

func emit(logger otellog.Logger, body string) {
	var rec otellog.Record
	rec.SetTimestamp(time.Now())
	rec.SetBody(attribute.StringValue(body))
	logger.Emit(context.Background(), rec)
}

func TestAgentExportsLogsAndMetricsWithTheirAttributes(t *testing.T) {
	rcv, err := otlptest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.Close()
	var local syncBuffer
	mon := &api.AgentMonitoring{LogsEndpoint: rcv.URL, MetricsEndpoint: rcv.URL + "/v1/metrics", Headers: map[string]string{"Authorization": secret}}
	a, err := StartAgent(context.Background(), fastConfig(), mon, Machine{Cluster: "dev", Group: "general", ID: "m-1", Version: "test"}, slog.New(slog.NewTextHandler(&local, nil)))
	if err != nil {
		t.Fatal(err)
	}
	emit(a.ReplicaLogger("web", "web-0", "abc123"), "GET / 200")
	slog.New(a.Handler()).Info("agent says hello", "replicas", 1)
	if err := a.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}

	byBody := map[string]otlptest.LogRecord{}
	for _, r := range rcv.Logs() {
		byBody[r.Body] = r
	}
	replica, own := byBody["GET / 200"], byBody["agent says hello"]
	for key, want := range map[string]string{AttrCluster: "dev", AttrGroup: "general", AttrMachine: "m-1", AttrService: "web", AttrReplica: "web-0", AttrRevision: "abc123"} {
		if replica.Resource[key] != want {
			t.Errorf("replica record: resource %s = %q, want %q (%v)", key, replica.Resource[key], want, replica.Resource)
		}
	}
	if own.Resource[AttrMachine] != "m-1" || own.Resource[AttrReplica] != "" {
		t.Errorf("agent record's resource: %v", own.Resource)
	}
	if got := a.LogStats(); got.Exported != 2 || got.Dropped() != 0 {
		t.Errorf("stats %+v, want 2 exported and none dropped", got)
	}
	if !strings.Contains(strings.Join(rcv.Metrics(), " "), "gantry.agent.log_records") {
		t.Errorf("metrics received: %v", rcv.Metrics())
	}
	for _, h := range rcv.Headers() {
		if h.Get("Authorization") != secret {
			t.Fatalf("a request came without the secret header: %v", h)
		}
	}
	if strings.Contains(local.String(), "s3cr3t") {
		t.Fatalf("the header secret was logged:\n%s", local.String())
	}
}

// TestDeadEndpointDropsAndCountsWithoutBlocking: with nothing listening,
// emitting never waits, what cannot be kept is dropped and counted, and
// the failure is told once without the header secret.
func TestDeadEndpointDropsAndCountsWithoutBlocking(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	var local syncBuffer
	cfg := fastConfig()
	cfg.Queue.QueueSize, cfg.Queue.BatchSize = 64, 16
	mon := &api.AgentMonitoring{LogsEndpoint: dead, Headers: map[string]string{"Authorization": secret}}
	a, err := StartAgent(context.Background(), cfg, mon, Machine{Cluster: "dev", Group: "general", ID: "m-1"}, slog.New(slog.NewTextHandler(&local, nil)))
	if err != nil {
		t.Fatal(err)
	}
	logger := a.ReplicaLogger("web", "web-0", "abc123")
	const lines = 20000
	for i := range lines {
		emit(logger, "line "+strings.Repeat("x", i%50))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	s := a.LogStats()
	if s.Exported != 0 || s.Dropped() != lines || s.DroppedFull == 0 || s.DroppedFailed == 0 {
		t.Fatalf("stats %+v: want all %d dropped, some for a full queue and some for failed exports", s, lines)
	}
	out := local.String()
	if strings.Count(out, "OTLP log export failing") != 1 || strings.Contains(out, "s3cr3t") {
		t.Fatalf("want one warning, without the secret:\n%s", out)
	}
}

func TestNoEndpointsNoExport(t *testing.T) {
	a, err := StartAgent(context.Background(), fastConfig(), &api.AgentMonitoring{}, Machine{}, slog.Default())
	if err != nil || a != nil {
		t.Fatalf("got %v, %v; want nothing to export", a, err)
	}
	if a.ReplicaLogger("s", "r", "h") != nil || a.Handler() != nil || a.Shutdown(context.Background()) != nil {
		t.Fatal("a nil Agent must export nothing")
	}
}

func TestBadEndpointNamesTheField(t *testing.T) {
	_, err := StartAgent(context.Background(), fastConfig(), &api.AgentMonitoring{LogsEndpoint: "otel:4318"}, Machine{}, slog.Default())
	if err == nil || !strings.Contains(err.Error(), "logs endpoint") {
		t.Fatalf("err = %v, want one naming the logs endpoint", err)
	}
}
