package agent

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/runtime/process"
)

// fakeServer stands in for the control plane's agent endpoints only: it
// records heartbeats and hands out whatever assignments the test sets.
type fakeServer struct {
	mu          sync.Mutex
	assignments []api.Assignment
	last        []api.ReplicaStatus
	down        bool
	refused     int
	// hold, when set, holds each heartbeat's answer until it is closed,
	// then answers it as if the server were up; held counts the
	// heartbeats held.
	hold   chan struct{}
	held   int
	joined api.JoinRequest
}

func (f *fakeServer) handler(t *testing.T) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/join", func(w http.ResponseWriter, r *http.Request) {
		var req api.JoinRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		f.mu.Lock()
		f.joined = req
		f.mu.Unlock()
		_ = json.NewEncoder(w).Encode(api.JoinResponse{MachineID: "m1", Credential: "gmc1.m1.secret", HeartbeatInterval: "50ms",
			Monitoring: &api.AgentMonitoring{LogsEndpoint: "https://127.0.0.1:9/v1/logs", Headers: map[string]string{"Authorization": "s3cr3t"}}})
	})
	mux.HandleFunc("POST /v1/machines/m1/heartbeat", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		hold := f.hold
		if hold != nil {
			f.held++
			f.mu.Unlock()
			<-hold
			f.mu.Lock()
		}
		defer f.mu.Unlock()
		if f.down && hold == nil {
			f.refused++
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		if r.Header.Get("Authorization") != "Bearer gmc1.m1.secret" {
			t.Errorf("heartbeat without the credential")
		}
		var req api.HeartbeatRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		f.last = req.Replicas
		_ = json.NewEncoder(w).Encode(api.HeartbeatResponse{Assignments: f.assignments, HeartbeatInterval: "50ms"})
	})
	return mux
}

func (f *fakeServer) set(as ...api.Assignment) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.assignments = as
}

func (f *fakeServer) status(id string) (api.ReplicaStatus, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.last {
		if s.ReplicaID == id {
			return s, true
		}
	}
	return api.ReplicaStatus{}, false
}

func startAgent(t *testing.T) (*fakeServer, string) {
	t.Helper()
	fs, dir, _ := startAgentAs(t, "")
	return fs, dir
}

func startAgentAs(t *testing.T, templateVersion string) (*fakeServer, string, *Agent) {
	t.Helper()
	return startAgentWith(t, func(c *Config) { c.TemplateVersion = templateVersion })
}

func startAgentWith(t *testing.T, edit func(*Config)) (*fakeServer, string, *Agent) {
	t.Helper()
	fs := &fakeServer{}
	srv := httptest.NewServer(fs.handler(t))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.ServerURL, cfg.Cluster, cfg.DataDir, cfg.JoinToken = srv.URL, "c", dir, "gjt1.token"
	cfg.RestartBackoff, cfg.MaxRestartBackoff, cfg.MinReportGap = 100*time.Millisecond, 400*time.Millisecond, 10*time.Millisecond
	edit(&cfg)
	a := New(cfg, process.New(process.Config{Dir: filepath.Join(dir, "replicas")}), slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return fs, dir, a
}

func assignment(id, hash string, command ...string) api.Assignment {
	return api.Assignment{ReplicaID: id, Service: "svc", SpecHash: hash, Spec: api.ServiceSpec{Command: command, StopTimeoutSeconds: 1}}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("gave up waiting for %s", what)
}

func TestCrashingReplicaRestartsWithBackoff(t *testing.T) {
	fs, dir := startAgent(t)
	fs.set(assignment("crash-0", "h1", "sh", "-c", "date +%s.%N >> starts; exit 3"))
	eventually(t, "4 restarts", func() bool {
		st, ok := fs.status("crash-0")
		return ok && st.Restarts >= 4
	})
	st, _ := fs.status("crash-0")
	if st.State != api.ReplicaCrashed && st.State != api.ReplicaRunning {
		t.Fatalf("state %s", st.State)
	}
	data, _ := os.ReadFile(filepath.Join(dir, "replicas", "crash-0", "starts"))
	starts := strings.Fields(string(data))
	if len(starts) < 4 {
		t.Fatalf("only %d starts recorded", len(starts))
	}
	// Gaps grow: 100ms, 200ms, 400ms (capped).
	gap := func(i int) float64 { return parseFloat(starts[i+1]) - parseFloat(starts[i]) }
	if !(gap(0) >= 0.09 && gap(1) >= 0.19 && gap(2) >= 0.39) {
		t.Fatalf("restart gaps %.3f %.3f %.3f do not back off", gap(0), gap(1), gap(2))
	}
	if !strings.Contains(st.Message, "exit status 3") && st.State == api.ReplicaCrashed {
		t.Fatalf("crash message %q does not say why", st.Message)
	}
}

func TestUnassignedReplicaStopsAndSpecChangeRestarts(t *testing.T) {
	fs, dir := startAgent(t)
	pidFile := filepath.Join(dir, "replicas", "web-0", "pid")
	fs.set(assignment("web-0", "h1", "sh", "-c", "echo $$ > pid; exec sleep 300"))
	eventually(t, "replica running", func() bool {
		st, ok := fs.status("web-0")
		return ok && st.State == api.ReplicaRunning && fileExists(pidFile)
	})
	first, _ := os.ReadFile(pidFile)
	fs.set(assignment("web-0", "h2", "sh", "-c", "echo $$ > pid; exec sleep 300"))
	eventually(t, "restart with the new spec", func() bool {
		now, _ := os.ReadFile(pidFile)
		st, _ := fs.status("web-0")
		return len(now) > 0 && string(now) != string(first) && st.SpecHash == "h2"
	})
	fs.set()
	eventually(t, "replica gone from status", func() bool {
		_, ok := fs.status("web-0")
		return !ok
	})
	pid := strings.TrimSpace(readFile(pidFile))
	eventually(t, "process stopped", func() bool { return !fileExists("/proc/" + pid) })
}

func TestServerDownKeepsReplicasRunning(t *testing.T) {
	fs, dir := startAgent(t)
	pidFile := filepath.Join(dir, "replicas", "db-0", "pid")
	fs.set(assignment("db-0", "h1", "sh", "-c", "echo $$ > pid; exec sleep 300"))
	eventually(t, "replica running", func() bool { return fileExists(pidFile) })
	pid := strings.TrimSpace(readFile(pidFile))
	fs.mu.Lock()
	fs.down = true
	fs.mu.Unlock()
	eventually(t, "ten heartbeats refused", func() bool {
		fs.mu.Lock()
		defer fs.mu.Unlock()
		return fs.refused >= 10
	})
	if !fileExists("/proc/" + pid) {
		t.Fatal("replica stopped while the server was unreachable")
	}
	fs.mu.Lock()
	fs.down = false
	fs.mu.Unlock()
	eventually(t, "status reported again", func() bool {
		st, ok := fs.status("db-0")
		return ok && st.State == api.ReplicaRunning && st.Restarts == 0
	})
}

func TestCredentialKeptWithMode0600(t *testing.T) {
	fs, dir := startAgent(t)
	_ = fs
	eventually(t, "credential file", func() bool { return fileExists(filepath.Join(dir, "credential.json")) })
	info, _ := os.Stat(filepath.Join(dir, "credential.json"))
	if info.Mode().Perm() != 0o600 {
		t.Fatalf("credential mode %v", info.Mode().Perm())
	}
}

// The agent reports the template version it was launched with, and keeps
// the monitoring configuration the server gave at join beside its
// credential (0600: header values are secrets).
func TestJoinKeepsMonitoringAndReportsTemplateVersion(t *testing.T) {
	fs, dir, a := startAgentAs(t, "v7")
	eventually(t, "credential file", func() bool { return fileExists(filepath.Join(dir, "credential.json")) })
	m, err := a.Monitoring()
	if err != nil || m == nil || m.LogsEndpoint != "https://127.0.0.1:9/v1/logs" || m.Headers["Authorization"] != "s3cr3t" {
		t.Fatalf("monitoring %+v %v", m, err)
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.joined.Inventory.TemplateVersion != "v7" {
		t.Fatalf("join inventory %+v", fs.joined.Inventory)
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func readFile(p string) string {
	data, _ := os.ReadFile(p)
	return string(data)
}

func parseFloat(s string) float64 {
	var f float64
	_ = json.Unmarshal([]byte(s), &f)
	return f
}

// A replica restarts on fresh host ports: the old one may have been taken
// meanwhile (here, by a listener of the test), and it must not
// crash-loop on the bind.
func TestRestartTakesFreshPorts(t *testing.T) {
	fs, dir := startAgent(t)
	as := assignment("port-0", "h1", "sh", "-c", "echo $PORT >> ports; exit 3")
	as.Spec.Ports = []api.Port{{Name: "http"}}
	fs.set(as)
	portsFile := filepath.Join(dir, "replicas", "port-0", "ports")
	starts := func() []string {
		data, _ := os.ReadFile(portsFile)
		return strings.Fields(string(data))
	}
	// Hold the port of the latest start (it has exited by then, unless a
	// restart took the same port again: then hold the next one).
	var held net.Listener
	var heldPort string
	var before int
	eventually(t, "a start's port held", func() bool {
		ports := starts()
		if len(ports) == 0 {
			return false
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+ports[len(ports)-1])
		if err != nil {
			return false
		}
		held, heldPort, before = l, ports[len(ports)-1], len(ports)
		return true
	})
	defer held.Close()
	eventually(t, "two more starts", func() bool { return len(starts()) >= before+2 })
	for i, p := range starts()[before:] {
		if p == heldPort {
			t.Fatalf("restart %d took port %s again while it was held", before+i, p)
		}
	}
}
