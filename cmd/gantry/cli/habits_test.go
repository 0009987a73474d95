package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/gantry-dev/gantry/api"
	"github.com/spf13/cobra"
)

// fakeAPI answers the reads the CLI makes, from a fixed fleet: a cluster,
// a service with two replicas on one machine, each replica's output.
type fakeAPI struct {
	mu      sync.Mutex
	deleted []string
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	replicas := []api.Replica{
		{ID: "web-0", Service: "web", Cluster: "dev", Machine: "m1", State: api.ReplicaRunning, Address: "127.0.0.1", HostPorts: map[string]int{"http": 8080}, ResourceVersion: 7,
			Requests: api.Resources{MilliCPU: 100, MemoryBytes: 128 << 20}},
		{ID: "web-1", Service: "web", Cluster: "dev", Machine: "m1", State: api.ReplicaPending},
	}
	answer := func(v any) { _ = json.NewEncoder(w).Encode(v) }
	switch path := r.URL.Path; {
	case path == "/v1/usage":
		answer(api.UsageReport{Machines: []api.MachineUsage{{Machine: "m1", Usage: api.Usage{MilliCPU: 300, MemoryBytes: 96 << 20},
			Replicas: map[string]api.Usage{"web-0": {MilliCPU: 50, MemoryBytes: 64 << 20}, "web-1": {MilliCPU: 250, MemoryBytes: 32 << 20}}}}})
	case path == "/healthz":
		answer(api.ServerHealth{Status: "ok", Version: "v9.9.9", Commit: "abcdef"})
	case path == "/v1/clusters":
		answer(map[string]any{"items": []api.Cluster{{Kind: api.KindCluster, Metadata: api.ObjectMeta{Name: "dev"}}}})
	case path == "/v1/services":
		answer(map[string]any{"items": []api.Service{{Kind: api.KindService, Metadata: api.ObjectMeta{Name: "web"}, Spec: api.ServiceSpec{Cluster: "dev", Command: []string{"web"}}}}})
	case path == "/v1/services/web":
		answer(api.Service{Kind: api.KindService, Metadata: api.ObjectMeta{Name: "web"}})
	case path == "/v1/failovergroups":
		answer(map[string]any{"items": []api.FailoverGroup{}})
	case path == "/v1/machines":
		answer(map[string]any{"items": []api.Machine{{ID: "m1", Cluster: "dev", JoinState: api.JoinJoined, FleetState: api.FleetActive, Cordoned: true,
			Allocatable: api.Resources{MilliCPU: 1000, MemoryBytes: 1 << 30}}}})
	case path == "/v1/replicas" && r.URL.Query().Get("service") != "":
		answer(map[string]any{"items": replicas})
	case path == "/v1/replicas":
		answer(map[string]any{"items": replicas})
	case strings.HasPrefix(path, "/v1/replicas/") && strings.HasSuffix(path, "/logs"):
		id := strings.TrimSuffix(strings.TrimPrefix(path, "/v1/replicas/"), "/logs")
		_, _ = w.Write([]byte("started " + id + "\nserving " + id + "\n"))
	case strings.HasPrefix(path, "/v1/replicas/") && r.Method == http.MethodDelete:
		f.mu.Lock()
		f.deleted = append(f.deleted, strings.TrimPrefix(path, "/v1/replicas/"))
		f.mu.Unlock()
		answer(replicas[0])
	case strings.HasPrefix(path, "/v1/replicas/"):
		for _, rep := range replicas {
			if "/v1/replicas/"+rep.ID == path {
				answer(rep)
				return
			}
		}
		w.WriteHeader(http.StatusNotFound)
		answer(api.ErrorBody{Error: api.ErrorDetail{Code: "not-found", Message: "replica not found"}})
	default:
		w.WriteHeader(http.StatusNotFound)
		answer(api.ErrorBody{Error: api.ErrorDetail{Code: "not-found", Message: "no route " + path}})
	}
}

// run runs the CLI against srv and returns its output, errors and exit
// status.
func run(srv *httptest.Server, args ...string) (string, string, int) {
	var out, errOut bytes.Buffer
	code := Execute(append([]string{"--server", srv.URL, "--token", "t"}, args...), &out, &errOut)
	return out.String(), errOut.String(), code
}

func fakeServer(t *testing.T) (*httptest.Server, *fakeAPI) {
	f := &fakeAPI{}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return srv, f
}

// Every command has an Examples section (usage errors print its first).
func TestEveryCommandHasExamples(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Example == "" && !c.Hidden && c.Name() != "help" && c.Name() != "completion" {
			t.Errorf("%s has no examples (cmd/gantry/cli/examples.go)", c.CommandPath())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRoot(&globals{}))
}

// A command called wrongly says how to call it; an unknown one offers
// the nearest on one line.
func TestUsageErrorsTeach(t *testing.T) {
	srv, _ := fakeServer(t)
	_, errOut, code := run(srv, "gte", "services")
	if code != 1 || !strings.Contains(errOut, `unknown command "gte" for "gantry" (did you mean "get"?)`) || strings.Contains(errOut, "; ;") {
		t.Errorf("unknown command: exit %d\n%s", code, errOut)
	}
	_, errOut, code = run(srv, "logs", "a", "b")
	for _, want := range []string{"error: accepts 1 arg(s), received 2", "Usage: gantry logs", "Example:", "gantry logs web-0", "See 'gantry logs --help'"} {
		if code != 1 || !strings.Contains(errOut, want) {
			t.Errorf("logs with two arguments: exit %d, output lacks %q:\n%s", code, want, errOut)
		}
	}
	_, errOut, _ = run(srv, "get", "replicaz")
	if !strings.Contains(errOut, `unknown resource type "replicaz" (did you mean "replicas"?)`) {
		t.Errorf("a mistyped kind: %s", errOut)
	}
	_, errOut, _ = run(srv, "get", "replicas", "-o", "jsn")
	if !strings.Contains(errOut, "(did you mean json?)") {
		t.Errorf("a mistyped output format: %s", errOut)
	}
}

// Names as -o name prints them go back into get, describe-style
// arguments, several kinds, all, custom columns and scripts' fields.
func TestGetTakesWhatItPrints(t *testing.T) {
	srv, _ := fakeServer(t)
	names, _, code := run(srv, "get", "replicas", "-o", "name")
	if code != 0 || names != "replica/web-0\nreplica/web-1\n" {
		t.Fatalf("-o name: exit %d %q", code, names)
	}
	out, errOut, code := run(srv, append([]string{"get"}, strings.Fields(names)...)...)
	if code != 0 || !strings.Contains(out, "web-0") || !strings.Contains(out, "web-1") {
		t.Fatalf("get of what -o name printed: exit %d\n%s%s", code, out, errOut)
	}
	out, _, _ = run(srv, "get", "all")
	for _, want := range []string{"cluster/dev", "service/web", "machine/m1", "replica/web-0"} {
		if !strings.Contains(out, want) {
			t.Errorf("get all lacks %s:\n%s", want, out)
		}
	}
	out, _, _ = run(srv, "get", "machines")
	if !strings.Contains(out, "active,cordoned") {
		t.Errorf("a cordoned machine's row does not say so:\n%s", out)
	}
	out, _, _ = run(srv, "get", "svc,rep", "-o", "name")
	if out != "service/web\nreplica/web-0\nreplica/web-1\n" {
		t.Errorf("get svc,rep -o name: %q", out)
	}
	out, _, _ = run(srv, "get", "replicas", "-o", "custom-columns=NAME:.metadata.name,STATE:.state,URL:.url")
	want := "NAME    STATE     URL\nweb-0   running   http://127.0.0.1:8080\nweb-1   pending   <none>\n"
	if out != want {
		t.Errorf("custom columns:\n%q\nwant\n%q", out, want)
	}
	out, _, _ = run(srv, "get", "replicas", "-o", "jsonpath={.items[*].metadata.name}")
	if out != "web-0 web-1\n" {
		t.Errorf("jsonpath of metadata.name: %q", out)
	}
	out, _, _ = run(srv, "get", "replica/web-0", "-o", "json")
	var one map[string]any
	if err := json.Unmarshal([]byte(out), &one); err != nil || one["kind"] != "Replica" || one["url"] != "http://127.0.0.1:8080" ||
		one["metadata"].(map[string]any)["resourceVersion"] != "7" {
		t.Errorf("a replica's JSON: %v\n%s", err, out)
	}
	_, errOut, code = run(srv, "get", "replicas", "-o", "jsonpath={.items[*].nosuch}")
	if code == 0 || !strings.Contains(errOut, "nosuch is not found") {
		t.Errorf("jsonpath of a missing field: exit %d %s", code, errOut)
	}
	_, errOut, code = run(srv, "get", "replicas", "--sort-by", ".nosuch")
	if code == 0 || !strings.Contains(errOut, "no replica has this field") {
		t.Errorf("--sort-by of a missing field: exit %d %s", code, errOut)
	}
}

// A watch's later rows keep the columns the first table set.
func TestTableWidthsCarryOver(t *testing.T) {
	var out bytes.Buffer
	first := &table{header: []string{"NAME", "STATE"}, rows: [][]string{{"a-long-name", "running"}}}
	widths := first.printWidths(&out, false, nil)
	later := &table{header: []string{"NAME", "STATE"}, rows: [][]string{{"b", "pending"}}, noHeader: true}
	later.printWidths(&out, false, widths)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || strings.Index(lines[2], "pending") != strings.Index(lines[0], "STATE") {
		t.Errorf("rows drift from the header:\n%s", out.String())
	}
}

// logs of a service prints every replica's lines, prefixed; delete takes
// KIND/NAME; version asks the server.
func TestLogsOfAServiceDeleteAndVersion(t *testing.T) {
	srv, f := fakeServer(t)
	out, errOut, code := run(srv, "logs", "web")
	if code != 0 || out != "[web-0] started web-0\n[web-0] serving web-0\n[web-1] started web-1\n[web-1] serving web-1\n" {
		t.Errorf("logs of a service: exit %d %q %s", code, out, errOut)
	}
	out, _, _ = run(srv, "logs", "replica/web-0")
	if out != "started web-0\nserving web-0\n" {
		t.Errorf("logs of replica/web-0: %q", out)
	}
	_, errOut, code = run(srv, "logs", "web-0", "--previous", "-f")
	if code == 0 || !strings.Contains(errOut, "cannot be followed") {
		t.Errorf("--previous with -f: exit %d %s", code, errOut)
	}
	out, _, code = run(srv, "delete", "replica/web-1")
	if code != 0 || out != "replica/web-1 deleted\n" || len(f.deleted) != 1 || f.deleted[0] != "web-1" {
		t.Errorf("delete replica/web-1: exit %d %q, deleted %v", code, out, f.deleted)
	}
	out, _, _ = run(srv, "version")
	if !strings.Contains(out, "Client: gantry") || !strings.Contains(out, "Server: gantry v9.9.9 (commit abcdef) at "+srv.URL) {
		t.Errorf("version:\n%s", out)
	}
}

// gantry dev's hint names a command that runs: gantry when this binary
// is the one on PATH, its path when it is elsewhere, and a build when
// `go run` made a temporary one.
func TestDevHintNamesACommandThatRuns(t *testing.T) {
	dir := t.TempDir()
	bin := dir + "/gantry"
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	found := func(string) (string, error) { return bin, nil }
	missing := func(string) (string, error) { return "", errors.New("not found") }
	exe := func(path string) func() (string, error) { return func() (string, error) { return path, nil } }
	if got := cliCommand(exe(bin), found); got != "gantry" {
		t.Errorf("on PATH: %q", got)
	}
	if got := cliCommand(exe(bin), missing); got != bin {
		t.Errorf("not on PATH: %q, want its path", got)
	}
	if got := cliCommand(exe("/tmp/go-build123/b001/exe/gantry"), missing); got != "" {
		t.Errorf("go run: %q", got)
	}
	if hint := anotherTerminal(""); !strings.Contains(hint, "go build -o gantry ./cmd/gantry") || !strings.Contains(hint, "./gantry get replicas") {
		t.Errorf("hint after go run: %q", hint)
	}
}

// top shows what machines and replicas use, against what they have or
// asked for, sorted on request.
func TestTopShowsUsage(t *testing.T) {
	srv, _ := fakeServer(t)
	out, errOut, code := run(srv, "top", "machines")
	if code != 0 || out != "NAME   CPU(cores)   CPU%   MEMORY   MEMORY%\nm1     300m         30%    96Mi     9%\n" {
		t.Errorf("top machines: exit %d\n%q\n%s", code, out, errOut)
	}
	out, _, _ = run(srv, "top", "replicas", "--sort-by", "cpu")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[1], "web-1 ") || !strings.HasPrefix(lines[2], "web-0 ") || !strings.Contains(lines[2], "50%") {
		t.Errorf("top replicas --sort-by cpu:\n%s\nwant web-1 first, web-0 at 50%% of its cpu request", out)
	}
	if _, errOut, code := run(srv, "top", "services"); code == 0 || !strings.Contains(errOut, "machines or replicas") {
		t.Errorf("top services: exit %d %s", code, errOut)
	}
}
