package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
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
	"github.com/gantry-dev/gantry/store/postgres/pgtest"
)

// Several `gantry server` processes on one PostgreSQL database, making
// machines through the exec provider's example script (agent processes
// on this host, in a directory every server shares: one "cloud").

const (
	haToken         = "e2e-shared-admin-token"
	haEncryptionKey = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
)

// lease settings short enough for tests; the margin (1 s) still covers a
// pass and a call.
var haLeaseArgs = []string{"--lease-duration", "3s", "--lease-renew-deadline", "2s", "--lease-retry-period", "250ms"}

type haCluster struct {
	t        *testing.T
	dir      string
	db       string
	machines string
	config   string
	servers  []*haServer
	// local: the servers make machines with the local provider (each
	// keeps its own data dir; the machines are agent processes this host
	// shows to every server).
	local bool
	// agentServers, when set, are the URLs agents reach the servers at
	// (proxies the test can cut), in the servers' order; extra are more
	// flags for every server.
	agentServers []string
	extra        []string
}

type haServer struct {
	name, dataDir, url, logPath string
	cmd                         *exec.Cmd
}

func newHA(t *testing.T, n int, db string) *haCluster { return newHAWith(t, n, db, false) }

func newHAWith(t *testing.T, n int, db string, local bool) *haCluster {
	return newHAConfigured(t, n, db, local, nil, nil)
}

// newHAConfigured starts n servers; proxies, when set, makes the address
// agents reach each server at (it is given the server's address).
func newHAConfigured(t *testing.T, n int, db string, local bool, proxy func(serverAddr string) string, extra []string) *haCluster {
	t.Helper()
	dir := t.TempDir()
	h := &haCluster{t: t, dir: dir, db: db, machines: filepath.Join(dir, "machines"), local: local, extra: extra}
	h.config = scriptExecConfig(t, dir, h.machines)
	var urls []string
	for i := range n {
		s := &haServer{name: fmt.Sprintf("s%d", i+1), dataDir: filepath.Join(dir, fmt.Sprintf("s%d", i+1))}
		s.url = "https://" + freeAddr(t)
		s.logPath = s.dataDir + ".log"
		urls = append(urls, s.url)
		h.servers = append(h.servers, s)
		if proxy != nil {
			h.agentServers = append(h.agentServers, "https://"+proxy(hostPort(s.url)))
		}
	}
	t.Cleanup(func() {
		for _, s := range h.servers {
			h.kill(s)
			if t.Failed() {
				data, _ := os.ReadFile(s.logPath)
				t.Logf("server %s log:\n%s", s.name, data)
			}
		}
		if t.Failed() {
			logScriptMachines(t, h.machines)
		}
		killScriptMachines(h.machines)
		for _, s := range h.servers {
			killMachines(s.dataDir)
		}
	})
	for _, s := range h.servers {
		h.start(s, urls)
	}
	return h
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func (h *haCluster) urls() []string {
	var out []string
	for _, s := range h.servers {
		out = append(out, s.url)
	}
	return out
}

func (h *haCluster) start(s *haServer, urls []string) {
	h.t.Helper()
	args := append([]string{"server", "--data-dir", s.dataDir}, serverArgs...)
	args = append(args, haLeaseArgs...)
	agentServers := urls
	if len(h.agentServers) > 0 {
		agentServers = h.agentServers
	}
	args = append(args, "--store", h.db, "--name", s.name, "--listen", hostPort(s.url), "--advertise-url", s.url,
		"--agent-servers", strings.Join(agentServers, ","), "--exec-config", h.config)
	args = append(args, h.extra...)
	if h.local {
		// Agents outlive the server that launched them, as machines do.
		args = append(args, "--local-exit-with-server=false")
	}
	log, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		h.t.Fatal(err)
	}
	defer log.Close()
	s.cmd = gantryCommand(args...)
	s.cmd.Env = append(os.Environ(), "GANTRY_ADMIN_TOKEN="+haToken, "GANTRY_ENCRYPTION_KEY="+haEncryptionKey)
	s.cmd.Stdout, s.cmd.Stderr = log, log
	if err := s.cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	waitFor(h.t, s.name+" serving", func() (bool, string) {
		_, err := health(s)
		return err == nil, fmt.Sprint(err)
	})
}

func (h *haCluster) kill(s *haServer) {
	if s.cmd != nil && s.cmd.ProcessState == nil {
		_ = s.cmd.Process.Signal(syscall.SIGCONT)
		_ = s.cmd.Process.Signal(syscall.SIGKILL)
		_ = s.cmd.Wait()
	}
}

type healthBody struct {
	Status string `json:"status"`
	Server string `json:"server"`
	Leader bool   `json:"leader"`
}

func health(s *haServer) (healthBody, error) {
	c := trustingClient(s.dataDir, time.Second)
	resp, err := c.Get(s.url + "/healthz")
	if err != nil {
		return healthBody{}, err
	}
	defer resp.Body.Close()
	var b healthBody
	return b, json.NewDecoder(resp.Body).Decode(&b)
}

// leader waits until exactly one running server leads, and returns it.
func (h *haCluster) leader(except ...*haServer) *haServer {
	h.t.Helper()
	var found *haServer
	waitFor(h.t, "one leader", func() (bool, string) {
		found = nil
		leaders := 0
		for _, s := range h.servers {
			if b, err := health(s); err == nil && b.Leader {
				leaders++
				found = s
			}
		}
		for _, e := range except {
			if found == e {
				return false, "the old leader still leads"
			}
		}
		return leaders == 1, fmt.Sprintf("%d leaders", leaders)
	})
	return found
}

func (h *haCluster) api() *client.Client {
	return client.New(strings.Join(h.urls(), ","), haToken, trustingClient(h.servers[0].dataDir, 10*time.Second))
}

func (h *haCluster) apply(spec string) {
	h.t.Helper()
	waitFor(h.t, "apply accepted", func() (bool, string) {
		_, err := h.api().Apply(context.Background(), []byte(spec))
		return err == nil, fmt.Sprint(err)
	})
}

// scriptMachine is one machine of the example script.
type scriptMachine struct {
	id, state, machine string
	alive              bool
}

func (h *haCluster) scriptMachines() []scriptMachine {
	dirs, _ := filepath.Glob(filepath.Join(h.machines, "pm-*"))
	var out []scriptMachine
	for _, dir := range dirs {
		state, _ := os.ReadFile(filepath.Join(dir, "state"))
		tags, _ := os.ReadFile(filepath.Join(dir, "tags.json"))
		var tagMap map[string]string
		_ = json.Unmarshal(tags, &tagMap)
		pid, _ := os.ReadFile(filepath.Join(dir, "pid"))
		n, _ := strconv.Atoi(strings.TrimSpace(string(pid)))
		out = append(out, scriptMachine{id: filepath.Base(dir), state: strings.TrimSpace(string(state)), machine: tagMap["gantry.dev/machine"],
			alive: n > 0 && syscall.Kill(n, 0) == nil && !zombie(n)})
	}
	return out
}

func zombie(pid int) bool {
	stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return strings.Contains(string(stat), ") Z ")
}

// fleetTrue: every running instance belongs to exactly one live machine
// (no duplicate, no leak), and every live machine has its instance.
func (h *haCluster) fleetTrue(want int) (bool, string) {
	machines, err := h.api().ListMachines(context.Background(), "")
	if err != nil {
		return false, err.Error()
	}
	live := map[string]api.Machine{}
	for _, m := range machines {
		if m.FleetState != api.FleetTerminated {
			live[m.ID] = m
		}
	}
	owners := map[string]int{}
	for _, sm := range h.scriptMachines() {
		if sm.state != "running" {
			continue
		}
		if !sm.alive {
			return false, sm.id + " is running but its agent is dead"
		}
		owners[sm.machine]++
		if _, ok := live[sm.machine]; !ok {
			return false, fmt.Sprintf("instance %s is leaked: machine %s is not live", sm.id, sm.machine)
		}
	}
	for id, m := range live {
		if owners[id] != 1 {
			return false, fmt.Sprintf("machine %s (%s/%s) has %d running instances", id, m.JoinState, m.FleetState, owners[id])
		}
		if m.JoinState != api.JoinJoined || (m.FleetState != api.FleetReady && m.FleetState != api.FleetActive) {
			return false, fmt.Sprintf("machine %s is %s/%s", id, m.JoinState, m.FleetState)
		}
		for _, c := range m.Conditions {
			if c.Status == "False" { // a machine that cannot take replicas is not the fleet's
				return false, fmt.Sprintf("machine %s: %s is False: %s", id, c.Type, c.Message)
			}
		}
	}
	if len(live) != want {
		return false, fmt.Sprintf("%d live machines, want %d", len(live), want)
	}
	return true, ""
}

func haSpec(minSize int, version string) string {
	return haSpecOf("exec", "pm.medium", minSize, version)
}

// haSpecOf is the HA tests' cluster ha of a provider and instance type,
// with a service web of 3 replicas at version. Its machines share this
// host, so its network is the host's: an overlay would have each of them,
// and any other run's, take the host's one WireGuard interface (gantry0).
func haSpecOf(provider, instanceType string, minSize int, version string) string {
	return fmt.Sprintf(`kind: Cluster
metadata: {name: ha}
spec:
  provider: {name: %s}
  network: {mode: host}
  capacityGroups:
    - {groupId: general, instanceType: %s, minSize: %d, maxSize: 4}
---
kind: Service
metadata: {name: web}
spec:
  cluster: ha
  command: [gantry, hello]
  env: {VERSION: "%s"}
  ports: [{name: http}]
  replicas: 3
  resources: {cpu: 500m, memory: 256Mi}
  healthCheck:
    http: {port: http, path: /healthz}
    intervalSeconds: 1
`, provider, instanceType, minSize, version)
}

func seeded(t *testing.T) *rand.Rand {
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("GANTRY_HA_SEED"); v != "" {
		seed, _ = strconv.ParseUint(v, 10, 64)
	}
	t.Logf("kill points drawn with GANTRY_HA_SEED=%d", seed)
	return rand.New(rand.NewPCG(seed, seed))
}

func (h *haCluster) webAnswers(version string) (bool, string) {
	rs, err := h.api().ListReplicas(context.Background(), "web")
	if err != nil {
		return false, err.Error()
	}
	if ok, why := allAnswer(rs, 3); !ok {
		return false, why
	}
	for _, r := range rs {
		if r.SpecHash != rs[0].SpecHash {
			return false, "replicas run different specs"
		}
	}
	svc, err := h.api().GetService(context.Background(), "web")
	if err != nil || svc.Spec.Env["VERSION"] != version {
		return false, fmt.Sprintf("service not at %s: %v", version, err)
	}
	return true, ""
}

// The leader is killed (SIGKILL) at a random point of a scale-up, then its
// successor at a random point of a rollout: each time another server
// leads, and the fleet converges with no duplicate and no leaked instance.
func TestHALeaderKilledDuringScaleUpAndRollout(t *testing.T) {
	rng := seeded(t)
	h := newHA(t, 3, pgtest.URL(t))
	first := h.leader()
	h.apply(haSpec(2, "1"))
	waitPasses(t, first.dataDir, first.url, rng.IntN(8)) // a random point of the scale-up, counted in the leader's passes
	h.kill(first)
	second := h.leader(first)
	waitFor(t, "web v1 answering", func() (bool, string) { return h.webAnswers("1") })

	h.apply(haSpec(2, "2"))
	waitPasses(t, second.dataDir, second.url, rng.IntN(8)) // a random point of the rollout
	h.kill(second)
	h.start(first, h.urls())
	h.leader(second)
	waitFor(t, "web v2 answering", func() (bool, string) { return h.webAnswers("2") })
	waitFor(t, "a true fleet", func() (bool, string) { return h.fleetTrue(countLive(t, h)) })
}

// countLive is the number of live machines the store holds, at least the
// group's minimum.
func countLive(t *testing.T, h *haCluster) int {
	ms, err := h.api().ListMachines(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range ms {
		if m.FleetState != api.FleetTerminated {
			n++
		}
	}
	return max(n, 2)
}

// A leader paused (SIGSTOP) past its lease is deposed; resumed, it
// neither writes nor launches: it steps down and follows.
func TestHAPausedLeaderIsFenced(t *testing.T) {
	h := newHA(t, 2, pgtest.URL(t))
	h.apply(haSpec(1, "1"))
	waitFor(t, "one machine", func() (bool, string) { return h.fleetTrue(1) })
	paused := h.leader()
	if err := paused.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	next := h.leaderWhilePaused(paused)
	h.apply(haSpec(3, "1"))
	waitFor(t, "three machines under the new leader", func() (bool, string) { return h.fleetTrue(3) })
	logSize := fileSize(paused.logPath)
	if err := paused.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the resumed server to follow", func() (bool, string) {
		b, err := health(paused)
		return err == nil && !b.Leader, fmt.Sprintf("%+v %v", b, err)
	})
	waitPasses(t, next.dataDir, next.url, 10)
	after := readFrom(paused.logPath, logSize)
	for _, forbidden := range []string{"launching machine", "msg=Launched"} {
		if strings.Contains(after, forbidden) {
			t.Fatalf("the deposed leader acted after it resumed (%q):\n%s", forbidden, after)
		}
	}
	if ok, why := h.fleetTrue(3); !ok {
		t.Fatalf("after the old leader resumed: %s", why)
	}
}

// leaderWhilePaused finds the new leader among the servers that answer.
func (h *haCluster) leaderWhilePaused(paused *haServer) *haServer {
	h.t.Helper()
	var found *haServer
	waitFor(h.t, "another server to lead", func() (bool, string) {
		for _, s := range h.servers {
			if s == paused {
				continue
			}
			if b, err := health(s); err == nil && b.Leader {
				found = s
				return true, ""
			}
		}
		return false, "no leader yet"
	})
	return found
}

func fileSize(path string) int64 {
	info, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return info.Size()
}

func readFrom(path string, offset int64) string {
	data, _ := os.ReadFile(path)
	if int64(len(data)) < offset {
		return ""
	}
	return string(data[offset:])
}

// PostgreSQL stops for longer than the lease: the leader steps down
// before its lease ends and nothing is launched meanwhile; once the
// database is back, a leader takes over and the fleet converges.
func TestHADatabaseOutage(t *testing.T) {
	pg := pgtest.NewServer(t)
	h := newHA(t, 2, pg.URL())
	h.apply(haSpec(1, "1"))
	waitFor(t, "one machine", func() (bool, string) { return h.fleetTrue(1) })
	lead := h.leader()
	pg.Stop()
	waitFor(t, "no server leading", func() (bool, string) {
		for _, s := range h.servers {
			if b, err := health(s); err == nil && b.Leader {
				return false, s.name + " leads"
			}
		}
		return true, ""
	})
	if !strings.Contains(readFrom(lead.logPath, 0), "stepped down") {
		t.Fatalf("the leader did not step down on its own")
	}
	before := len(h.scriptMachines())
	// Nothing may launch for longer than a lease: wait for enough failed
	// attempts to take the lease (one per retry period, 250 ms) to cover
	// 4 s, instead of a sleep.
	for _, s := range h.servers {
		attempts := strings.Count(readFrom(s.logPath, 0), `msg="leader lease"`)
		waitFor(t, s.name+" trying to lead for 4 s", func() (bool, string) {
			n := strings.Count(readFrom(s.logPath, 0), `msg="leader lease"`) - attempts
			return n >= 16, fmt.Sprintf("%d attempts", n)
		})
	}
	if got := len(h.scriptMachines()); got != before {
		t.Fatalf("%d instances launched while the database was down", got-before)
	}
	pg.Start()
	h.leader()
	h.apply(haSpec(2, "1"))
	waitFor(t, "two machines after the outage", func() (bool, string) { return h.fleetTrue(2) })
}

// logScriptMachines logs each of the exec script's machines (a failed
// test's): its state, its arguments and the end of its agent's log.
func logScriptMachines(t *testing.T, dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "pm-") {
			continue
		}
		state, _ := os.ReadFile(filepath.Join(dir, e.Name(), "state"))
		args, _ := os.ReadFile(filepath.Join(dir, e.Name(), "args"))
		agentLog, _ := os.ReadFile(filepath.Join(dir, e.Name(), "agent.log"))
		if len(agentLog) > 2000 {
			agentLog = agentLog[len(agentLog)-2000:]
		}
		t.Logf("machine %s (%s): %s\nagent log, its end:\n%s", e.Name(), strings.TrimSpace(string(state)), args, agentLog)
	}
}
