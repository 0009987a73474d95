package loadgen

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/client"
	"github.com/gantry-dev/gantry/server"
)

// startServer runs a server over HTTPS and returns it with its CA.
func startServer(t testing.TB) (*server.Server, []byte) {
	cfg := server.DefaultConfig(t.TempDir())
	cfg.Listen = "127.0.0.1:0"
	// Joins are limited per client address, and the generator joins
	// every machine from one: it would take 10,000 / 50 s.
	cfg.RateLimits.MutatingRate = 0
	srv, err := server.New(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; srv.Close() })
	<-srv.Ready()
	caPEM, err := os.ReadFile(server.CACertPath(cfg.DataDir))
	if err != nil {
		t.Fatal(err)
	}
	return srv, caPEM
}

// The generator joins its machines through the API and every heartbeat
// it sends is answered.
func TestSmallRun(t *testing.T) {
	srv, caPEM := startServer(t)
	cfg := DefaultConfig()
	cfg.Servers, cfg.AdminToken, cfg.CAPEM = srv.URL(), srv.AdminToken(), caPEM
	cfg.Machines, cfg.Rate, cfg.Duration, cfg.Warmup, cfg.Workers = 20, 200, 500*time.Millisecond, 0, 8
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != 100 || res.Failed != 0 || res.P99 <= 0 {
		t.Fatalf("result: %+v", res)
	}
}

// Services given to the load are applied while the warm-up runs, and the
// measured run begins once the servers hold all their replicas.
func TestRunWithServices(t *testing.T) {
	srv, caPEM := startServer(t)
	cfg := DefaultConfig()
	cfg.Servers, cfg.AdminToken, cfg.CAPEM = srv.URL(), srv.AdminToken(), caPEM
	cfg.Machines, cfg.Rate, cfg.Duration, cfg.Warmup, cfg.Workers = 20, 200, 200*time.Millisecond, 200*time.Millisecond, 8
	cfg.Services, cfg.ReplicasPerService = 150, 2 // two applies
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Replicas != 300 || res.Failed != 0 {
		t.Fatalf("result: %+v, want 300 replicas held", res)
	}
}

// BenchmarkHeartbeatFleet is the fleet-scale heartbeat figure of
// BENCHMARKS.md: one server (SQLite), GANTRY_LOAD_MACHINES machines
// (default 10,000) at GANTRY_LOAD_RATE heartbeats/s (default 2,000) for
// 20 s after a 5 s warm-up; it reports latency from when each heartbeat
// was due.
func BenchmarkHeartbeatFleet(b *testing.B) {
	cfg := DefaultConfig()
	cfg.Machines, cfg.Rate, cfg.Duration, cfg.Warmup = envInt("GANTRY_LOAD_MACHINES", 10000), float64(envInt("GANTRY_LOAD_RATE", 2000)), 20*time.Second, 5*time.Second
	for i := 0; i < b.N; i++ {
		srv, caPEM := startServer(b)
		cfg.Servers, cfg.AdminToken, cfg.CAPEM, cfg.Cluster = srv.URL(), srv.AdminToken(), caPEM, "load"+strconv.Itoa(i)
		res, err := Run(context.Background(), cfg)
		if err != nil {
			b.Fatal(err)
		}
		if res.Failed > 0 {
			b.Fatalf("%d heartbeats failed: %s", res.Failed, res.FirstError)
		}
		b.ReportMetric(float64(res.P50.Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(res.P99.Microseconds())/1000, "p99-ms")
		b.ReportMetric(res.Rate(), "heartbeats/s")
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// An apply that fails (a busy server's 503 or timeout) is sent again:
// at 50,000 machines one such failure ended a run of an hour.
func TestFailedApplyIsSentAgain(t *testing.T) {
	srv, caPEM := startServer(t)
	var applies atomic.Int32
	front := inFront(t, srv, caPEM, func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path == "/v1/apply" && applies.Add(1) == 2 { // the cluster's, then the first services'
			http.Error(w, `{"reason":"unavailable","message":"busy"}`, http.StatusServiceUnavailable)
			return true
		}
		return false
	})
	cfg := DefaultConfig()
	cfg.Servers, cfg.AdminToken = front.URL, srv.AdminToken()
	cfg.Machines, cfg.Rate, cfg.Duration, cfg.Warmup, cfg.Workers = 20, 200, 200*time.Millisecond, 200*time.Millisecond, 8
	cfg.Services, cfg.ReplicasPerService, cfg.PlaceRetryWait = 150, 2, 10*time.Millisecond
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Replicas != 300 || applies.Load() != 4 {
		t.Fatalf("%d replicas held after %d applies, want 300 after 4 (the cluster's, then the services' three times: the first refused)", res.Replicas, applies.Load())
	}
}

// Each drive goes on from the machine after the last one's: a run cut
// into warm-ups shorter than a round of the fleet still heartbeats every
// machine (at 50,000 machines and 1,000/s, 30-second warm-ups that each
// began again at the first machine left 20,000 silent, and the servers
// found them lost).
func TestEveryMachineBeatsAcrossDrives(t *testing.T) {
	var mu sync.Mutex
	beats := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		beats[r.URL.Path]++
		mu.Unlock()
		_, _ = io.WriteString(w, `{"assignments":[]}`)
	}))
	defer srv.Close()
	machines := &roster{}
	for i := range 10 {
		machines.add(machine{id: fmt.Sprintf("m%d", i), api: client.New(srv.URL, "token", srv.Client())})
	}
	cfg := DefaultConfig()
	cfg.Rate, cfg.Workers = 600, 2
	for range 2 {
		if _, err := drive(context.Background(), cfg, machines, 10*time.Millisecond); err != nil { // 6 beats
			t.Fatal(err)
		}
	}
	for i := range 10 {
		if path := fmt.Sprintf("/v1/machines/m%d/heartbeat", i); beats[path] == 0 {
			t.Errorf("machine m%d never heartbeat in two drives of 6 beats (beats %v)", i, beats)
		}
	}
}

// The machines that joined heartbeat while the others join: the last
// join is held until a heartbeat has come through.
func TestJoinedMachinesBeatWhileOthersJoin(t *testing.T) {
	srv, caPEM := startServer(t)
	var joins, beats atomic.Int32
	beaten := make(chan struct{})
	front := inFront(t, srv, caPEM, func(w http.ResponseWriter, r *http.Request) bool {
		switch {
		case strings.HasSuffix(r.URL.Path, "/heartbeat"):
			if beats.Add(1) == 1 {
				close(beaten)
			}
		case r.URL.Path == "/v1/join" && joins.Add(1) == 5:
			select {
			case <-beaten:
			case <-time.After(20 * time.Second): // within the client's Timeout: no join sent again
				http.Error(w, `{"reason":"invalid","message":"no heartbeat came while the machines joined"}`, http.StatusBadRequest)
				return true
			}
		}
		return false
	})
	cfg := DefaultConfig()
	cfg.Servers, cfg.AdminToken = front.URL, srv.AdminToken()
	cfg.Machines, cfg.Rate, cfg.Duration, cfg.Warmup, cfg.Workers, cfg.JoinWorkers = 5, 100, 100*time.Millisecond, 0, 4, 1
	cfg.Timeout = time.Minute
	if _, err := Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
}

// inFront is a plain-HTTP proxy to srv whose intercept sees each request
// first and may answer it itself (true).
func inFront(t *testing.T, srv *server.Server, caPEM []byte, intercept func(http.ResponseWriter, *http.Request) bool) *httptest.Server {
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	target, err := url.Parse(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !intercept(w, r) {
			proxy.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(front.Close)
	return front
}
