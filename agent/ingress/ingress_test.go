package ingress

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
)

// A replica keeps its slot while it stays; a new one takes a slot that
// was free before the change; only changed slots get commands.
func TestPlanKeepsEachReplicaInItsSlot(t *testing.T) {
	route := func(backends ...string) []api.IngressRoute {
		r := api.IngressRoute{Name: "web", Port: 8080, Protocol: api.ExposeHTTP}
		for i, b := range backends {
			r.Backends = append(r.Backends, api.IngressTarget{Replica: b, Address: "127.0.0.1", Port: 20000 + i, Weight: 1})
		}
		return []api.IngressRoute{r}
	}
	first := plan(nil, route("a", "b"), 4)
	if got := first.routes[0].slots; got[0].replica != "a" || got[1].replica != "b" || len(got) != 4 {
		t.Fatalf("first plan %+v, want a and b in slots 0 and 1 of 4", got)
	}
	second := plan(first, route("b", "c"), 4)
	slots := second.routes[0].slots
	if slots[0].replica != "" || slots[1].replica != "b" || slots[2].replica != "c" {
		t.Fatalf("second plan %+v, want slot 0 freed, b kept in 1, c in 2 (free before)", slots)
	}
	cmds := runtimeCommands(first, second)
	want := []string{ // the newcomer enters before the leaver leaves
		"set server exposed-8080/s1 addr 127.0.0.1 port 20000",
		"set server exposed-8080/s2 addr 127.0.0.1 port 20001",
		"set server exposed-8080/s2 weight 1",
		"set server exposed-8080/s2 state ready",
		"set server exposed-8080/s0 state maint",
	}
	if strings.Join(cmds, "\n") != strings.Join(want, "\n") {
		t.Errorf("commands:\n%s\nwant:\n%s", strings.Join(cmds, "\n"), strings.Join(want, "\n"))
	}
	if !second.sameShape(first) {
		t.Error("the same port and room: want the same shape (no reload)")
	}
	grown := plan(second, route("a", "b", "c", "d", "e"), 4)
	if grown.sameShape(second) || len(grown.routes[0].slots) != 10 || grown.routes[0].slots[1].replica != "b" {
		t.Errorf("5 replicas in 4 slots: %d slots (b in %q), want 10 and a reload, b kept", len(grown.routes[0].slots), grown.routes[0].slots[1].replica)
	}
}

// haproxyOrSkip finds HAProxy; CI installs it, and its absence there is
// a failure.
func haproxyOrSkip(t *testing.T) {
	t.Helper()
	if err := New(DefaultConfig("")).Available(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v (scripts/test.sh installs it)", err)
		}
		t.Skip(err)
	}
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// replica is an HTTP server answering its name.
func replica(t testing.TB, name string) api.IngressTarget {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, name) }))
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().(*net.TCPAddr)
	return api.IngressTarget{Replica: name, Address: "127.0.0.1", Port: addr.Port, Weight: 1}
}

func newProxy(t *testing.T) *Proxy {
	t.Helper()
	cfg := DefaultConfig(t.TempDir())
	// A worker a reload replaced may keep a client's connection open
	// until the stop's grace ends: a short one keeps the test short.
	cfg.BindAddress, cfg.Room, cfg.StopTimeout = "127.0.0.1", 4, 500*time.Millisecond
	p := New(cfg)
	if err := p.Available(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p
}

// HAProxy serves an exposed port from the replicas it is given, follows
// a change of replicas through the runtime API (the same worker), and a
// new port through a reload that refuses no request of a client sending
// all along.
func TestProxyFollowsItsRoutesWithoutFailing(t *testing.T) {
	haproxyOrSkip(t)
	ctx := context.Background()
	p := newProxy(t)
	port := freePort(t)
	a, b, c := replica(t, "a"), replica(t, "b"), replica(t, "c")
	web := api.IngressRoute{Name: "web", Port: port, Protocol: api.ExposeHTTP, Backends: []api.IngressTarget{a, b}}
	if err := p.Apply(ctx, []api.IngressRoute{web}); err != nil {
		t.Fatal(err)
	}
	url := "http://127.0.0.1:" + strconv.Itoa(port)
	if got := answers(t, url, 20); !got["a"] || !got["b"] || len(got) != 2 {
		t.Fatalf("answers %v, want a and b", got)
	}
	worker, err := workerPID(ctx, p.adminSocket())
	if err != nil {
		t.Fatal(err)
	}

	failed, sent, stopLoad := load(url)

	web.Backends = []api.IngressTarget{b, c}
	if err := p.Apply(ctx, []api.IngressRoute{web}); err != nil {
		t.Fatal(err)
	}
	if got := answers(t, url, 20); !got["b"] || !got["c"] || got["a"] {
		t.Errorf("after the change: answers %v, want b and c only", got)
	}
	if now, _ := workerPID(ctx, p.adminSocket()); now != worker {
		t.Errorf("a change of replicas reloaded HAProxy (worker %s, then %s): want the runtime API", worker, now)
	}

	other := freePort(t)
	admin := api.IngressRoute{Name: "admin", Port: other, Protocol: api.ExposeTCP, Backends: []api.IngressTarget{a}}
	if err := p.Apply(ctx, []api.IngressRoute{web, admin}); err != nil {
		t.Fatal(err)
	}
	if now, _ := workerPID(ctx, p.adminSocket()); now == worker {
		t.Errorf("a new port: worker %s still, want a reload", now)
	}
	if got := answers(t, "http://127.0.0.1:"+strconv.Itoa(other), 5); !got["a"] || len(got) != 1 {
		t.Errorf("the new tcp port answers %v, want a", got)
	}
	stopLoad()
	if failed.Load() != 0 || sent.Load() == 0 {
		t.Errorf("%d of %d requests failed while the replicas changed and HAProxy reloaded, want 0", failed.Load(), sent.Load())
	}

	http.DefaultClient.CloseIdleConnections() // a soft stop waits for open connections
	if err := p.Apply(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get(url); err == nil {
		t.Error("no routes: the port still answers, want HAProxy stopped")
	}
}

// answers are the distinct bodies of n requests.
func answers(t *testing.T, url string, n int) map[string]bool {
	t.Helper()
	got := map[string]bool{}
	for range n {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got[string(body)] = true
	}
	return got
}

// A configuration HAProxy refuses (a port another process holds) is an
// error naming why, and HAProxy is not left half-started.
func TestProxyReportsAPortItCannotTake(t *testing.T) {
	haproxyOrSkip(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	p := newProxy(t)
	port := taken.Addr().(*net.TCPAddr).Port
	err = p.Apply(context.Background(), []api.IngressRoute{{Name: "web", Port: port, Protocol: api.ExposeHTTP, Backends: []api.IngressTarget{replica(t, "a")}}})
	if err == nil {
		t.Fatal("a port another process listens on: no error")
	}
	if p.alive() {
		t.Error("HAProxy left running after a failed start")
	}
	t.Logf("error: %v", err)
}

// A directory too deep for HAProxy's socket paths (97 bytes) gets its
// sockets elsewhere, one directory per ingress directory.
func TestSocketsOfADeepDirectoryFit(t *testing.T) {
	deep := New(DefaultConfig("/tmp/" + strings.Repeat("d", 120) + "/ingress"))
	other := New(DefaultConfig("/tmp/" + strings.Repeat("e", 120) + "/ingress"))
	for _, sock := range []string{deep.adminSocket(), deep.masterSocket()} {
		if len(sock) > 97 {
			t.Errorf("%s: %d bytes, want at most 97", sock, len(sock))
		}
	}
	if deep.socketDir() == other.socketDir() {
		t.Error("two deep directories share their sockets' directory")
	}
	if short := New(DefaultConfig("/var/lib/gantry/ingress")); short.socketDir() != "/var/lib/gantry/ingress" {
		t.Errorf("a short directory keeps its sockets: %s", short.socketDir())
	}
	// gantry dev's data dir is relative (.gantry): HAProxy takes a
	// relative socket path for a network address.
	if rel := New(DefaultConfig(".gantry/machines/m/ingress")); !filepath.IsAbs(rel.adminSocket()) || !filepath.IsAbs(rel.configFile()) {
		t.Errorf("a relative directory: socket %s, configuration %s, want absolute paths", rel.adminSocket(), rel.configFile())
	}
}

// The sockets' own directory under the temporary directory goes with the
// proxy that made it.
func TestStopRemovesTheSocketsDirectoryItMade(t *testing.T) {
	haproxyOrSkip(t)
	cfg := DefaultConfig(filepath.Join(t.TempDir(), strings.Repeat("d", 100), "ingress"))
	cfg.BindAddress, cfg.Room, cfg.StopTimeout = "127.0.0.1", 4, 500*time.Millisecond
	p := New(cfg)
	t.Cleanup(p.Stop)
	port := freePort(t)
	if err := p.Apply(context.Background(), []api.IngressRoute{{Name: "web", Port: port, Protocol: api.ExposeHTTP, Backends: []api.IngressTarget{replica(t, "a")}}}); err != nil {
		t.Fatal(err)
	}
	sockets := p.socketDir()
	if sockets == cfg.Dir {
		t.Fatalf("%s: a deep directory keeps its sockets elsewhere", sockets)
	}
	if _, err := os.Stat(p.adminSocket()); err != nil {
		t.Fatalf("HAProxy's socket: %v", err)
	}
	p.Stop()
	if _, err := os.Stat(sockets); !os.IsNotExist(err) {
		t.Fatalf("%s left after Stop: %v", sockets, err)
	}
}

// load sends requests to url one after another until stopped, counting
// those sent and those that failed.
func load(url string) (failed, sent *atomic.Int64, stop func()) {
	failed, sent = new(atomic.Int64), new(atomic.Int64)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		client := &http.Client{Timeout: 5 * time.Second}
		for {
			select {
			case <-done:
				return
			default:
			}
			sent.Add(1)
			resp, err := client.Get(url)
			if err != nil || resp.StatusCode != http.StatusOK {
				failed.Add(1)
			}
			if resp != nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}
	}()
	return failed, sent, func() { close(done); wg.Wait() }
}
