// Package e2e runs the real gantry binary: a server, agents as child
// processes through the local provider, replicas answering HTTP on
// loopback. Nothing is mocked.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/client"
	"github.com/gantry-dev/gantry/internal/pki"
	gantryserver "github.com/gantry-dev/gantry/server"
	"golang.org/x/sys/unix"
)

// gantryBin is built once by TestMain, with buildFlags. It is not
// race-instrumented even under -race: that would compile the cloud SDKs a
// second time (minutes on 2 cores); the server's and agent's concurrency is
// raced in process (server, agent and fleet tests, and the in-process server
// of the fault tests here).
var (
	gantryBin  string
	buildFlags = []string{"build"}
)

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "agent" {
		// A server run in this process (inProcessServer) launches local
		// machines with its own executable, this test binary: it must not
		// run the whole suite again (and launch more of itself), nor stay.
		fmt.Fprintln(os.Stderr, "the e2e test binary is no agent: the in-process servers' machines never join")
		os.Exit(2)
	}
	if url := os.Getenv(getEnv); url != "" {
		// Run under `ip netns exec` by a test: one GET from inside a
		// machine's network namespace.
		body, ok := get(url)
		fmt.Print(body)
		if !ok {
			os.Exit(1)
		}
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "gantry-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	gantryBin = filepath.Join(dir, "gantry")
	build := exec.Command("go", append(buildFlags, "-o", gantryBin, "../cmd/gantry")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build gantry:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	// This run's image tag goes; the layers other tags share stay.
	_ = exec.Command("docker", "image", "rm", e2eImage).Run()
	os.Exit(code)
}

// getEnv makes this test binary GET a URL and exit (see getFrom).
const getEnv = "GANTRY_E2E_GET"

// parallelTests: most tests here mostly wait (for processes to start,
// join, heartbeat, be killed) and call t.Parallel, so they run two at a
// time (go test's -parallel, GOMAXPROCS by default). Each uses its own
// ports, directories, Docker network, namespace and image tag. These stay
// serial, and run before the parallel ones: those that set environment
// variables for the servers they start (t.Setenv: the failover, OTLP,
// secrets and AWS tests), and those that measure leases, fencing or
// partitions or count failed requests through a deployment (HA, failover,
// network namespaces, provider faults, the docker overlay, ingress, the
// fault schedule), where a busy neighbour would only add noise.

// waitLimit bounds every wait; reaching it is a failure, not a timing claim.
const waitLimit = 90 * time.Second

// serverArgs make loops fast enough for tests on a loaded 2-core machine.
var serverArgs = []string{
	"--listen", "127.0.0.1:0", "--reconcile-interval", "200ms", "--heartbeat-interval", "300ms",
	"--missed-heartbeats", "4", "--heartbeat-flush-interval", "100ms", "--reschedule-grace", "1s", "--launch-backoff", "500ms", "--local-stop-grace", "3s",
}

type server struct {
	t       *testing.T
	dataDir string
	cmd     *exec.Cmd
	log     *bytes.Buffer
	url     string
	token   string
	api     *client.Client
}

// startServer runs `gantry server` on dataDir and waits for its URL.
func startServer(t *testing.T, dataDir string, extra ...string) *server {
	t.Helper()
	os.Remove(filepath.Join(dataDir, "server.url"))
	args := append([]string{"server", "--data-dir", dataDir}, serverArgs...)
	cmd := gantryCommand(append(args, extra...)...)
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &server{t: t, dataDir: dataDir, cmd: cmd, log: &log}
	t.Cleanup(func() {
		s.kill()
		killMachines(dataDir)
		waitGone(t, dataDir)
		if t.Failed() {
			t.Logf("server log:\n%s", log.String())
			t.Logf("machines' logs:\n%s", machineLogs(dataDir))
		}
	})
	waitFor(t, "server.url", func() (bool, string) {
		data, err := os.ReadFile(filepath.Join(dataDir, "server.url"))
		s.url = strings.TrimSpace(string(data))
		return err == nil && s.url != "", "not written yet"
	})
	token, err := os.ReadFile(filepath.Join(dataDir, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	s.token = strings.TrimSpace(string(token))
	httpClient := trustingClient(dataDir, 10*time.Second)
	s.api = client.New(s.url, s.token, httpClient)
	waitFor(t, "server healthy", func() (bool, string) {
		resp, err := httpClient.Get(s.url + "/healthz")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == 200, resp.Status
	})
	return s
}

// trustingClient trusts the CA a server wrote into dataDir, if any.
func trustingClient(dataDir string, timeout time.Duration) *http.Client {
	c := &http.Client{Timeout: timeout}
	if caPEM, err := os.ReadFile(gantryserver.CACertPath(dataDir)); err == nil {
		if cfg, err := pki.PoolClientConfig(caPEM); err == nil {
			c.Transport = &http.Transport{TLSClientConfig: cfg}
		}
	}
	return c
}

// hostPort is a server URL's address.
func hostPort(serverURL string) string {
	u, err := url.Parse(serverURL)
	if err != nil {
		return serverURL
	}
	return u.Host
}

func (s *server) kill() {
	if s.cmd.ProcessState == nil {
		_ = s.cmd.Process.Signal(syscall.SIGKILL)
		_ = s.cmd.Wait()
	}
}

// gantryCommand is a long-lived gantry process of the test's (a server,
// `gantry dev`, an agent): killed when the test binary dies, so a run
// interrupted past its cleanups (a timeout's panic, a signal) leaves no
// server behind, nor the machines a server takes with it.
func gantryCommand(args ...string) *exec.Cmd {
	cmd := exec.Command(gantryBin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

// gantry runs the CLI against this server.
func (s *server) gantry(args ...string) (stdout, stderr string, code int) {
	return runGantry(s.t, append([]string{"--data-dir", s.dataDir}, args...)...)
}

func runGantry(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	// No command may hang a test: reaching this is a failure.
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, gantryBin, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if exit, ok := err.(*exec.ExitError); ok {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}

func (s *server) replicas(service string) []api.Replica {
	s.t.Helper()
	rs, err := s.api.ListReplicas(context.Background(), service)
	if err != nil {
		s.t.Fatal(err)
	}
	return rs
}

func (s *server) machines() []api.Machine {
	s.t.Helper()
	ms, err := s.api.ListMachines(context.Background(), "")
	if err != nil {
		s.t.Fatal(err)
	}
	return ms
}

// waitFor polls cond until it holds, failing the test after waitLimit.
func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	last := ""
	for time.Now().Before(deadline) {
		ok, detail := cond()
		if ok {
			return
		}
		last = detail
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("gave up waiting for %s: %s", what, last)
}

// answers GETs a replica's URL and returns the body.
func answers(r api.Replica) (string, bool) {
	port, ok := r.HostPorts["http"]
	if !ok || r.Address == "" {
		return "", false
	}
	return get(fmt.Sprintf("http://%s:%d/", r.Address, port))
}

func get(url string) (string, bool) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return "", false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body), resp.StatusCode == 200
}

// allAnswer: n replicas run and each answers HTTP as itself.
func allAnswer(rs []api.Replica, n int) (bool, string) {
	if len(rs) != n {
		return false, fmt.Sprintf("%d replicas, want %d", len(rs), n)
	}
	for _, r := range rs {
		if r.State != api.ReplicaRunning {
			return false, fmt.Sprintf("%s is %s (%s)", r.ID, r.State, r.Reason)
		}
		body, ok := answers(r)
		if !ok || !strings.Contains(body, "replica "+r.ID+" on machine "+r.Machine) {
			return false, fmt.Sprintf("%s (%s on %s) does not answer as itself at %s %v: %q", r.ID, r.Health, r.Machine, r.Address, r.HostPorts, body)
		}
	}
	return true, ""
}

type localInstance struct {
	ID    string            `json:"id"`
	State string            `json:"state"`
	PID   int               `json:"pid"`
	Tags  map[string]string `json:"tags"`
	Args  []string          `json:"args"`
}

func localInstances(dataDir string) []localInstance {
	data, err := os.ReadFile(filepath.Join(dataDir, "local", "instances.json"))
	if err != nil {
		return nil
	}
	var out []localInstance
	_ = json.Unmarshal(data, &out)
	return out
}

// killMachines kills every agent (and its replicas) the local provider of
// dataDir started, so a failed test leaves nothing behind.
func killMachines(dataDir string) {
	for _, inst := range localInstances(dataDir) {
		if inst.PID > 0 && processAlive(inst.PID, inst.ID) {
			_ = syscall.Kill(-inst.PID, syscall.SIGKILL)
			_ = syscall.Kill(inst.PID, syscall.SIGKILL)
		}
	}
}

// waitGone waits until no process is left whose command line or working
// directory is in dataDir (a replica dies after its agent, through its
// parent-death signal, and a PostgreSQL child after its postmaster), so
// the test's directory is not removed under a process still writing in
// it. One left past waitLimit is killed and is the test's failure: a
// machine's kill must take everything it ran.
func waitGone(t *testing.T, dataDir string) {
	deadline := time.Now().Add(waitLimit)
	for {
		pids := processesMentioning(dataDir)
		if len(pids) == 0 {
			return
		}
		if !waitExited(pids, deadline) {
			for _, pid := range pids {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			t.Errorf("processes %v outlived their machines' kill (of %s)", pids, dataDir)
			return
		}
	}
}

// waitExited waits for each of pids to exit (its pidfd to become
// readable: no child of ours, so not waited on), until deadline; false
// if one still runs then.
func waitExited(pids []int, deadline time.Time) bool {
	for _, pid := range pids {
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue // gone already
		}
		exited := false
		for {
			left := time.Until(deadline)
			if left <= 0 {
				break
			}
			n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, int(left.Milliseconds())+1)
			if err == unix.EINTR {
				continue
			}
			exited = err == nil && n > 0
			break
		}
		unix.Close(fd)
		if !exited {
			return false
		}
	}
	return true
}

// processAlive checks pid still runs the agent of instance id.
func processAlive(pid int, id string) bool {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && strings.Contains(string(cmdline), id)
}

// processesMentioning lists live pids whose command line or working
// directory contains s.
func processesMentioning(s string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if strings.Contains(string(stat), ") Z ") {
			continue // a zombie waiting for its parent to reap it
		}
		cwd, _ := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		if strings.Contains(string(cmdline), s) || strings.Contains(cwd, s) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	content = strings.ReplaceAll(content, e2eImagePlaceholder, e2eImage)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// apply writes a spec into the server's directory and applies it.
func (s *server) apply(t *testing.T, name, content string) {
	t.Helper()
	if _, errOut, code := s.gantry("apply", "-f", writeFile(t, s.dataDir, name, content)); code != 0 {
		t.Fatalf("apply %s: %s", name, errOut)
	}
}

// startWeb starts a server whose machines die with it, applies webSpec and
// waits until its 3 replicas answer.
func startWeb(t *testing.T) *server {
	t.Helper()
	s := startServer(t, t.TempDir(), "--local-exit-with-server")
	s.apply(t, "web.yaml", webSpec)
	waitFor(t, "3 replicas answering HTTP", func() (bool, string) { return allAnswer(s.replicas("web"), 3) })
	return s
}

// instanceOf is the local instance of a machine.
func instanceOf(t *testing.T, dir, machine string) localInstance {
	t.Helper()
	for _, inst := range localInstances(dir) {
		if inst.Tags["gantry.dev/machine"] == machine {
			return inst
		}
	}
	t.Fatalf("no local instance for machine %s", machine)
	return localInstance{}
}

// passes is how many control-loop passes the server at url, whose data
// dir is dataDir, has made.
func passes(t *testing.T, dataDir, url string) int {
	t.Helper()
	body := ""
	if resp, err := trustingClient(dataDir, 2*time.Second).Get(url + "/metrics"); err == nil {
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(data)
	}
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, "gantry_reconcile_duration_seconds_count "); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err == nil {
				return n
			}
		}
	}
	return 0
}

// waitPasses waits until the server at url has made n more passes: the
// events a test of "nothing happens" waits for, instead of a duration.
func waitPasses(t *testing.T, dataDir, url string, n int) {
	t.Helper()
	target := passes(t, dataDir, url) + n
	waitFor(t, fmt.Sprintf("%d more control-loop passes", n), func() (bool, string) {
		got := passes(t, dataDir, url)
		return got >= target, fmt.Sprintf("%d passes, want %d", got, target)
	})
}

// agentLogCount counts the lines of a local machine's agent log that
// contain text.
func agentLogCount(dataDir, instanceID, text string) int {
	data, _ := os.ReadFile(filepath.Join(dataDir, "local", "machines", instanceID, "agent.log"))
	return strings.Count(string(data), text)
}

// linesOf streams r's lines until it ends.
func linesOf(r io.Reader) <-chan string {
	lines := make(chan string, 1000)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	return lines
}

// watchOutput runs a CLI command that keeps printing (get -w) against the
// server and streams its lines; stop ends it.
func (s *server) watchOutput(args ...string) (lines <-chan string, stop func()) {
	s.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, gantryBin, append([]string{"--data-dir", s.dataDir}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		s.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	return linesOf(stdout), func() { cancel(); _ = cmd.Wait() }
}
