package server

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/client"
	"github.com/gantry-dev/gantry/server/relay"
	"github.com/gantry-dev/gantry/store"
)

// failingStore fails every write while failing is set, as a full disk or a
// read-only file system makes SQLite fail.
type failingStore struct {
	store.Store
	failing *atomic.Bool
}

func (f failingStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	unavailable := store.Unavailable("commit", errors.New("disk I/O error: no space left on device"))
	if f.failing.Load() {
		return unavailable
	}
	// Checked again at the end, as a full disk fails the commit: a write
	// that began before the failure does not land after it.
	return f.Store.Update(ctx, func(tx store.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		if f.failing.Load() {
			return unavailable
		}
		return nil
	})
}

// A store that cannot write shows: /healthz answers 503 with the error, a
// metric and a StoreWritable condition say so, clients get a 503 that
// names the store instead of "internal error"; all clear when it heals.
func TestStoreFailuresAreReported(t *testing.T) {
	var failing atomic.Bool
	ts := startServer(t, func(c *Config) {
		c.WrapStore = func(s store.Store) store.Store { return failingStore{Store: s, failing: &failing} }
	})
	if _, err := ts.admin.Apply(context.Background(), []byte(testCluster)); err != nil {
		t.Fatal(err)
	}
	failing.Store(true)
	status, eb := ts.do(t, "POST", "/v1/apply", ts.AdminToken(), "application/yaml", []byte(strings.Replace(testCluster, "maxSize: 3", "maxSize: 4", 1)))
	if status != http.StatusServiceUnavailable || eb.Error.Code != "store-unavailable" || !strings.Contains(eb.Error.Message, "no space left") {
		t.Fatalf("apply on a failing store: HTTP %d %+v", status, eb.Error)
	}
	// A write that began before the failure may still land after it and
	// mark the store healthy for a moment; the next failed write (the
	// control loop's, or a retried apply) marks it unhealthy again.
	waitFor(t, 10*time.Second, "/healthz, metrics and the StoreWritable condition to show the failure", func() bool {
		_, _ = ts.admin.Apply(context.Background(), []byte(strings.Replace(testCluster, "maxSize: 3", "maxSize: 4", 1)))
		code, health := ts.get(t, "/healthz")
		_, metrics := ts.get(t, "/metrics")
		c, err := ts.admin.GetCluster(context.Background(), "dev")
		if err != nil {
			t.Fatal(err)
		}
		cond := condition(c, api.ConditionStoreWritable)
		return code == http.StatusServiceUnavailable && strings.Contains(health, "no space left") &&
			strings.Contains(metrics, "gantry_store_healthy 0") && !strings.Contains(metrics, "gantry_store_write_failures_total 0") &&
			cond != nil && cond.Status == "False" && strings.Contains(cond.Message, "no space left")
	})
	failing.Store(false)
	if _, err := ts.admin.Apply(context.Background(), []byte(testCluster)); err != nil {
		t.Fatal(err)
	}
	if code, _ := ts.get(t, "/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz after the store healed: %d", code)
	}
	if c, _ := ts.admin.GetCluster(context.Background(), "dev"); condition(c, api.ConditionStoreWritable).Status != "True" {
		t.Fatalf("conditions after healing %+v", c.Status.Conditions)
	}
	if since := ts.livenessSince(); !since.After(ts.startedAt) {
		t.Fatal("heartbeats lost to the outage would count against the machines")
	}
}

// A joining machine gets its cluster's monitoring endpoints and header
// values read from their secrets, and the value is in no log.
func TestJoinDeliversMonitoring(t *testing.T) {
	t.Setenv("GANTRY_TEST_OTLP_TOKEN", "s3cr3t-value")
	logs := &lockedBuffer{}
	ts := startServerLogging(t, logs)
	spec := strings.Replace(testCluster, "spec:\n", "spec:\n  monitoring:\n    otlpLogsEndpoint: https://127.0.0.1:9/v1/logs\n    headers: [{name: Authorization, secretRef: {env: GANTRY_TEST_OTLP_TOKEN}}]\n", 1)
	if _, err := ts.admin.Apply(context.Background(), []byte(spec)); err != nil {
		t.Fatal(err)
	}
	tok, err := ts.admin.CreateJoinToken(context.Background(), api.JoinTokenRequest{Cluster: "dev", Group: "general"})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := ts.admin.Join(context.Background(), api.JoinRequest{Token: tok.Token, Cluster: "dev", MachineID: "m1",
		Inventory: api.Inventory{Capacity: api.Resources{MilliCPU: 1000, MemoryBytes: 1 << 30}, Runtimes: []string{"process"}, TemplateVersion: "v7"}})
	if err != nil {
		t.Fatal(err)
	}
	m := resp.Monitoring
	if m == nil || m.LogsEndpoint != "https://127.0.0.1:9/v1/logs" || m.Headers["Authorization"] != "s3cr3t-value" {
		t.Fatalf("monitoring %+v", m)
	}
	machine, err := ts.admin.GetMachine(context.Background(), "m1")
	if err != nil || machine.TemplateVersion != "v7" || machine.Provider != "external" {
		t.Fatalf("machine %+v %v", machine, err)
	}
	if strings.Contains(logs.String(), "s3cr3t-value") {
		t.Fatal("the secret value is in the server log")
	}
}

func startServerLogging(t *testing.T, w io.Writer) *testServer {
	t.Helper()
	return startServerWith(t, nil, slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug})))
}

func condition(c *api.Cluster, typ string) *api.Condition {
	for i := range c.Status.Conditions {
		if c.Status.Conditions[i].Type == typ {
			return &c.Status.Conditions[i]
		}
	}
	return nil
}

func (ts *testServer) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := ts.http.Get(ts.URL() + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

// Shutting down ends the agents' long polls at once instead of waiting for
// them (defect: `gantry dev` took the shutdown timeout to exit).
func TestShutdownEndsLongPolls(t *testing.T) {
	cfg := DefaultConfig(t.TempDir())
	cfg.Listen, cfg.LogPollWait, cfg.ShutdownTimeout = "127.0.0.1:0", time.Hour, time.Hour
	srv, err := New(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	<-srv.Ready()
	ts := newTestServer(t, srv, nil)
	if _, err := ts.admin.Apply(context.Background(), []byte(testCluster)); err != nil {
		t.Fatal(err)
	}
	credential := ts.joinManual(t, "dev", "m1")
	go func() { _, _ = client.New(srv.URL(), credential, ts.http).LogRequests(context.Background(), "m1") }()
	awaitPoll(t, srv.logs, "m1")
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the server waits for a long poll to end before it stops")
	}
}

// awaitPoll waits until the agent of machine polls hub for log
// requests.
func awaitPoll(t *testing.T, hub *relay.Logs, machine string) {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		polling, polled := hub.Polling(machine)
		if polling {
			return
		}
		select {
		case <-polled:
		case <-deadline:
			t.Fatal("the agent's poll never reached the server")
		}
	}
}

// lockedBuffer is a log the server writes while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// unreachableStore hangs every read while cut is set, as a PostgreSQL
// server behind a dropped network does.
type unreachableStore struct {
	store.Store
	cut *atomic.Bool
}

func (u unreachableStore) View(ctx context.Context, fn func(store.Tx) error) error {
	if u.cut.Load() {
		<-ctx.Done()
		return ctx.Err()
	}
	return u.Store.View(ctx, fn)
}

// A server whose last writes succeeded but whose store no longer answers
// is not healthy: /healthz asks the store, bounded in time.
func TestHealthAsksTheStore(t *testing.T) {
	var cut atomic.Bool
	ts := startServer(t, func(c *Config) {
		c.HealthPing = HealthPing{Timeout: 100 * time.Millisecond, Cache: time.Nanosecond}
		c.WrapStore = func(s store.Store) store.Store { return unreachableStore{Store: s, cut: &cut} }
	})
	if code, _ := ts.get(t, "/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz before the cut: %d", code)
	}
	cut.Store(true)
	code, body := ts.get(t, "/healthz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "store-unreachable") {
		t.Fatalf("/healthz with the store cut off: %d %s", code, body)
	}
	cut.Store(false)
	if code, _ := ts.get(t, "/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz after the store came back: %d", code)
	}
}
