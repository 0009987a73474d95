package e2e

import (
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/client"
	"github.com/gantry-dev/gantry/store/postgres/pgtest"
)

// The fault schedule (Jepsen-style): a FailoverGroup of PostgreSQL
// (synchronous, then asynchronous) on local machines of a 3-server
// control plane on PostgreSQL, under seeded, replayable schedules of
// faults: kill -9 of the primary's machine, of its agent, of the leading
// server; SIGSTOP/SIGCONT of the primary's agent, of its member, of the
// leader; partitions of the primary from the servers (its agent's
// connections cut at the servers' proxies), from the replica (replication
// refused in the primary's pg_hba.conf), and from both. A writer commits
// throughout (a write counts once PostgreSQL acknowledged it); every
// endpoint is sampled every 50 ms. After each schedule, with every fault
// healed, it checks: no acknowledged write is missing from the primary
// (synchronous; asynchronous: losses are counted and within
// maximumLagBytes), never two endpoints accepting writes at one instant
// (samples) nor the writes of two endpoints interleaving beyond what the
// failovers explain (history), no machine without exactly one agent and
// no agent without a live machine, every replica placed once, and a
// leader within the lease after each kill of the leader.
//
// GANTRY_FAULT_RUNS (default 20) schedules run, half of them
// synchronous; GANTRY_FAULT_SEED (default 1) is the first seed, and
// schedule i uses seed+i: a failing seed replays with
// GANTRY_FAULT_SEED=<seed> GANTRY_FAULT_RUNS=1 (and GANTRY_FAULT_MODE=sync
// or async). Each schedule starts from a healthy group; the soak figures
// are in docs/failover.md.
func TestFaultSchedule(t *testing.T) {
	runs, seed := envInt(t, "GANTRY_FAULT_RUNS", 20), envInt(t, "GANTRY_FAULT_SEED", 1)
	modes := []bool{true, false}
	switch os.Getenv("GANTRY_FAULT_MODE") {
	case "sync":
		modes = []bool{true}
	case "async":
		modes = []bool{false}
	}
	totals := newFaultTotals()
	for mi, synchronous := range modes {
		n := runs / len(modes)
		if mi == 0 {
			n += runs % len(modes)
		}
		if n == 0 {
			continue
		}
		name := map[bool]string{true: "synchronous", false: "asynchronous"}[synchronous]
		t.Run(name, func(t *testing.T) {
			env := newFaultEnv(t, synchronous)
			for i := range n {
				s := seed + mi*n + i
				ok := env.schedule(t, uint64(s), totals)
				if (i+1)%10 == 0 {
					t.Log(totals.summary()) // so far, for a soak stopped early
				}
				if !ok {
					t.Fatalf("schedule of seed %d failed: replay with GANTRY_FAULT_SEED=%d GANTRY_FAULT_RUNS=1 GANTRY_FAULT_MODE=%s",
						s, s, map[bool]string{true: "sync", false: "async"}[synchronous])
				}
			}
		})
	}
	t.Log(totals.summary())
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("%s=%q: want a number", name, v)
	}
	return n
}

const faultMaxLag = 1 << 20

func faultGroupSpec(binDir, dataRoot string, synchronous bool) string {
	mode := "synchronous: true"
	if !synchronous {
		mode = fmt.Sprintf("maximumLagBytes: %d", faultMaxLag)
	}
	return failoverGroupSpec(binDir, dataRoot, "", mode)
}

// faultEnv is one control plane and group that schedules run against.
type faultEnv struct {
	h           *haCluster
	proxies     []*pidProxy
	synchronous bool
	// server is the group's API as a client of every server.
	server *server
	// hba are the pg_hba.conf files a partition edited, to heal.
	hba []string
	// root holds the members' PostgreSQL files, a directory per machine.
	root string
}

func newFaultEnv(t *testing.T, synchronous bool) *faultEnv {
	bin := needPostgres(t)
	t.Setenv("GANTRY_E2E_PG_PASSWORD", pgPassword)
	root := pgDataRoot(t)
	e := &faultEnv{synchronous: synchronous, root: root}
	e.h = newHAConfigured(t, 3, pgtest.URL(t), true, func(addr string) string {
		p := startPIDProxy(t, addr)
		e.proxies = append(e.proxies, p)
		return p.addr()
	}, nil)
	t.Cleanup(func() {
		for _, s := range e.h.servers {
			if s.cmd != nil && s.cmd.ProcessState == nil {
				_ = s.cmd.Process.Signal(syscall.SIGCONT)
			}
		}
	})
	e.h.leader()
	e.h.apply(faultGroupSpec(bin, root, synchronous))
	e.server = &server{t: t, dataDir: e.h.servers[0].dataDir, url: strings.Join(e.h.urls(), ","), token: haToken, api: e.h.api()}
	return e
}

// fault is one injected fault.
type fault struct {
	kind     string
	duration time.Duration
}

var faultKinds = []string{"kill-primary-machine", "kill-primary-agent", "kill-leader", "stop-primary-agent", "stop-primary-member",
	"stop-leader", "partition-primary-from-servers", "partition-primary-from-replica", "partition-primary-from-both"}

// draw is a seed's schedule: one to three faults, each held 1–6 s after
// a pause of 0.5–2 s.
func draw(seed uint64) ([]fault, []time.Duration) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var faults []fault
	var pauses []time.Duration
	for range 1 + rng.IntN(3) {
		pauses = append(pauses, time.Duration(500+rng.IntN(1500))*time.Millisecond)
		faults = append(faults, fault{kind: faultKinds[rng.IntN(len(faultKinds))], duration: time.Duration(1000+rng.IntN(5000)) * time.Millisecond})
	}
	return faults, pauses
}

// schedule runs one seed's faults with a writer and the sampler, heals
// everything, and checks the histories; false when a check failed.
func (e *faultEnv) schedule(t *testing.T, seed uint64, totals *faultTotals) bool {
	return t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
		t.Cleanup(func() {
			if t.Failed() {
				e.logEvents(t)
				e.logMembers(t)
			}
		})
		e.recover(t, totals)
		faults, pauses := draw(seed)
		before := e.server.group(t)
		sampler, stopSampler := startSamplerEvery(t, e.server, 50*time.Millisecond)
		w, stopWriter := startWriter(t, e.server)
		var windows []faultWindow
		forced := false
		for i, f := range faults {
			// Each fault starts from a safe state: a healthy group whose
			// synchronous standby is recorded. Without it, a second fault
			// that kills a primary before its new replica is synchronous
			// leaves, rightly, no replica to promote without losing writes.
			forced = e.recover(t, totals) || forced
			time.Sleep(pauses[i])
			if len(windows) > 0 {
				windows[len(windows)-1].end = time.Now()
			}
			windows = append(windows, faultWindow{kind: f.kind, start: time.Now()})
			rto := e.inject(t, f)
			totals.leader(f.kind, rto)
			t.Logf("seed %d: %s for %s", seed, f.kind, f.duration)
		}
		e.healAll(t)
		forced = e.recover(t, totals) || forced
		// Writes after the last heal reach the final primary too.
		n := len(w.rows())
		waitFor(t, "writes after the heal", func() (bool, string) { return len(w.rows()) > n+10, "" })
		windows[len(windows)-1].end = time.Now()
		stopWriter()
		for _, win := range windows {
			totals.outage(win.kind, win.longestGap(w.rows()))
		}
		stopSampler()
		after := e.server.group(t)
		lost := e.lostRows(t, w)
		if forced {
			// What a promotion forced with --accept-data-loss lost is what
			// it accepted; counted apart.
			totals.forced(lost)
			lost = 0
		}
		totals.run(lost, len(sampler.split), int(after.Epoch-before.Epoch))
		if e.synchronous && lost > 0 {
			t.Errorf("%d acknowledged writes missing from the final primary (synchronous)", lost)
		}
		if !e.synchronous && lost*64 > faultMaxLag {
			t.Errorf("%d acknowledged writes lost: more than maximumLagBytes (%d) can hold", lost, faultMaxLag)
		}
		sampler.check(t)
		checkWriteHistory(t, w.rows())
		e.checkFleet(t)
		e.pruneTerminated(t)
	})
}

// pruneTerminated removes the PostgreSQL files of the group's machines
// that are no longer live (a soak replaces hundreds: their copies filled
// the disk). Terminated machines leave the store's list, so a directory
// is removed when no live machine of the list has its name. The
// directories are read first: a machine is in the list before its member
// makes its directory, so one launched meanwhile is never taken for dead.
func (e *faultEnv) pruneTerminated(t *testing.T) {
	dirs, _ := os.ReadDir(e.root)
	machines, err := e.h.api().ListMachines(context.Background(), "")
	if err != nil {
		t.Logf("prune terminated machines' files: %v", err)
		return
	}
	live := map[string]bool{}
	for _, m := range machines {
		if m.FleetState != api.FleetTerminated {
			live[m.ID] = true
		}
	}
	for _, d := range dirs {
		if !d.IsDir() || live[d.Name()] {
			continue
		}
		dir := filepath.Join(e.root, d.Name())
		_ = exec.Command("pkill", "-9", "-f", "postgres -D "+dir+"/").Run()
		_ = os.RemoveAll(dir)
	}
}

// logEvents prints the events of the group and the machines, for a
// failed schedule.
func (e *faultEnv) logEvents(t *testing.T) {
	events, err := e.h.api().ListEvents(context.Background(), client.EventQuery{Limit: 400})
	if err != nil {
		t.Logf("events: %v", err)
		return
	}
	var b strings.Builder
	for _, ev := range events {
		if ev.ObjectKind == api.KindFailoverGroup || ev.ObjectKind == "Machine" || ev.ObjectKind == "Replica" {
			fmt.Fprintf(&b, "%s %s %s/%s %s: %s\n", ev.Time.Format("15:04:05.000"), ev.Type, ev.ObjectKind, ev.ObjectName, ev.Reason, ev.Message)
		}
	}
	t.Logf("events:\n%s", b.String())
}

// logMembers prints the end of the output of the group's members, and
// of their machines' agents, still on disk: what a failed schedule needs
// to be understood (the test's directory goes with it).
func (e *faultEnv) logMembers(t *testing.T) {
	g, err := e.server.api.GetFailoverGroup(context.Background(), "pg")
	if err != nil || g.Status == nil {
		t.Logf("members: %v", err)
		return
	}
	mine := map[string]bool{}
	for _, m := range g.Status.Members {
		mine[m.Machine] = true
	}
	_ = filepath.WalkDir(e.h.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		member := strings.Contains(path, "/replicas/pg-") && d.Name() == "output.log"
		agent := d.Name() == "agent.log" && mine[filepath.Base(filepath.Dir(path))]
		if !member && !agent {
			return nil
		}
		if member && !mine[machineOfReplicaLog(path)] {
			return nil
		}
		data, _ := os.ReadFile(path)
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		t.Logf("%s (last %d lines):\n%s", path, min(len(lines), 60), strings.Join(lines[max(0, len(lines)-60):], "\n"))
		return nil
	})
}

// machineOfReplicaLog is the machine whose agent keeps a replica's log
// (…/machines/<machine>/…/replicas/<replica>/output.log), "" if none.
func machineOfReplicaLog(path string) string {
	parts := strings.Split(path, string(filepath.Separator))
	for i := len(parts) - 1; i > 0; i-- {
		if parts[i-1] == "machines" {
			return parts[i]
		}
	}
	return ""
}

// recover waits for the group to be healthy; when it refuses to promote a
// replica that may lack acknowledged writes (the primary died while it had
// no synchronous standby: unavailable, not unsafe), it is counted and the
// promotion forced with --accept-data-loss, as an operator would. It says
// whether it forced one.
func (e *faultEnv) recover(t *testing.T, totals *faultTotals) bool {
	t.Helper()
	g := e.server.waitGroup(t, "the group healthy, or refusing to promote", func(g *api.FailoverGroupInfo) bool {
		return e.isHealthy(g) || refusing(g)
	})
	if !refusing(g) {
		return false
	}
	totals.refusal()
	t.Logf("the group refuses to promote (%s): forcing it with --accept-data-loss", g.Message)
	e.logEvents(t)
	if err := e.h.api().RequestFailover(context.Background(), "pg", api.FailoverPromoteAcceptDataLoss); err != nil {
		t.Fatalf("promote --accept-data-loss: %v", err)
	}
	e.healthy(t)
	return true
}

func refusing(g *api.FailoverGroupInfo) bool {
	return g.Phase == "PrimaryFailed" && strings.Contains(g.Message, "not promoting the replica")
}

func (e *faultEnv) isHealthy(g *api.FailoverGroupInfo) bool {
	return g.Phase == "Healthy" && g.Endpoint != "" && (!e.synchronous || g.SyncStandby != "")
}

// healthy waits for the group to be Healthy, the synchronous one with its
// synchronous standby recorded (a schedule starts from a group that can
// fail over without loss).
func (e *faultEnv) healthy(t *testing.T) {
	t.Helper()
	e.server.waitGroup(t, "the group healthy", e.isHealthy)
}

// inject applies a fault for its duration and undoes it (a killed server
// is started again; a killed machine is the control plane's to replace).
// It returns, for a fault of the leader, how long until another server
// led.
func (e *faultEnv) inject(t *testing.T, f fault) time.Duration {
	t.Helper()
	g := e.server.group(t)
	primary := primaryMachine(g)
	agent := agentPID(primary)
	switch f.kind {
	case "kill-primary-machine":
		if agent > 0 {
			_ = syscall.Kill(-agent, syscall.SIGKILL)
			_ = syscall.Kill(agent, syscall.SIGKILL)
		}
		time.Sleep(f.duration)
	case "kill-primary-agent":
		if agent > 0 {
			_ = syscall.Kill(agent, syscall.SIGKILL)
		}
		time.Sleep(f.duration)
	case "stop-primary-agent":
		e.paused(agent, f.duration)
	case "stop-primary-member":
		e.paused(memberPID(agent), f.duration)
	case "kill-leader", "stop-leader":
		leader := e.h.leader()
		killed := time.Now()
		if f.kind == "kill-leader" {
			e.h.kill(leader)
		} else {
			_ = leader.cmd.Process.Signal(syscall.SIGSTOP)
		}
		next := e.h.leader(leader)
		rto := time.Since(killed)
		// How long the servers were without a leader is recorded (its
		// figure is in docs/failover.md), not asserted: it is a time, and
		// the lease and the retry period bound it only on an idle machine.
		if wait := f.duration - rto; wait > 0 {
			time.Sleep(wait)
		}
		if f.kind == "kill-leader" {
			e.h.start(leader, e.h.urls())
		} else {
			_ = leader.cmd.Process.Signal(syscall.SIGCONT)
		}
		t.Logf("%s %s: %s led %.2f s later", f.kind, leader.name, next.name, rto.Seconds())
		return rto
	case "partition-primary-from-servers":
		e.partitionFromServers(agent, f.duration)
	case "partition-primary-from-replica":
		e.partitionFromReplica(t, g, f.duration, nil)
	case "partition-primary-from-both":
		e.partitionFromReplica(t, g, f.duration, func() { e.partitionFromServers(agent, f.duration) })
	default:
		t.Fatalf("unknown fault %q", f.kind)
	}
	return 0
}

func (e *faultEnv) paused(pid int, d time.Duration) {
	if pid <= 0 {
		time.Sleep(d)
		return
	}
	_ = syscall.Kill(pid, syscall.SIGSTOP)
	time.Sleep(d)
	_ = syscall.Kill(pid, syscall.SIGCONT)
}

func (e *faultEnv) partitionFromServers(agent int, d time.Duration) {
	for _, p := range e.proxies {
		p.cut(agent)
	}
	time.Sleep(d)
	for _, p := range e.proxies {
		p.heal()
	}
}

// partitionFromReplica refuses replication connections at the primary
// (pg_hba.conf) and ends the one streaming, for d (running during, when
// given, meanwhile).
func (e *faultEnv) partitionFromReplica(t *testing.T, g *api.FailoverGroupInfo, d time.Duration, during func()) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgConnect(ctx, g.Endpoint)
	if err != nil {
		t.Logf("partition from the replica skipped: %v", err)
		time.Sleep(d)
		return
	}
	var hba string
	err = conn.QueryRow(ctx, "SHOW hba_file").Scan(&hba)
	if err == nil {
		var data []byte
		if data, err = os.ReadFile(hba); err == nil {
			err = os.WriteFile(hba, append([]byte(partitionLine), data...), 0o600)
			e.hba = append(e.hba, hba)
		}
	}
	if err == nil {
		_, err = conn.Exec(ctx, "SELECT pg_reload_conf()")
	}
	if err == nil {
		_, err = conn.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_replication")
	}
	conn.Close(context.Background())
	if err != nil {
		t.Logf("partition from the replica incomplete: %v", err)
	}
	if during != nil {
		during()
	} else {
		time.Sleep(d)
	}
	e.healReplication(g.Endpoint)
}

const partitionLine = "host replication all 127.0.0.1/32 reject # gantry fault schedule\n"

// healReplication removes the partition lines and reloads the server
// (if it still runs).
func (e *faultEnv) healReplication(endpoint string) {
	for _, hba := range e.hba {
		if data, err := os.ReadFile(hba); err == nil {
			_ = os.WriteFile(hba, []byte(strings.ReplaceAll(string(data), partitionLine, "")), 0o600)
		}
	}
	e.hba = nil
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if conn, err := pgConnect(ctx, endpoint); err == nil {
		_, _ = conn.Exec(ctx, "SELECT pg_reload_conf()")
		conn.Close(context.Background())
	}
}

// healAll ends every fault still in force: paused processes go on, dead
// servers start again, proxies pass everything.
func (e *faultEnv) healAll(t *testing.T) {
	for _, p := range e.proxies {
		p.heal()
	}
	for _, s := range e.h.servers {
		if s.cmd.ProcessState != nil {
			e.h.start(s, e.h.urls())
		} else {
			_ = s.cmd.Process.Signal(syscall.SIGCONT)
		}
	}
}

// lostRows counts the acknowledged rows the primary does not have.
func (e *faultEnv) lostRows(t *testing.T, w *pgWriter) int {
	t.Helper()
	acked := w.rows()
	ids := make([]int64, len(acked))
	for i, r := range acked {
		ids[i] = r.id
	}
	// The primary that serves once any failover under way has finished;
	// if it is failed over while it is read (a starved host's late
	// heartbeats can cause one), the one after it.
	var present int
	waitFor(t, "the final primary's count of the acknowledged writes", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		g := e.server.waitGroup(t, "a serving primary", func(g *api.FailoverGroupInfo) bool { return g.Endpoint != "" })
		conn, err := pgConnect(ctx, g.Endpoint)
		if err != nil {
			return false, fmt.Sprintf("epoch %d at %s: %v", g.Epoch, g.Endpoint, err)
		}
		defer conn.Close(context.Background())
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM rows WHERE id = ANY($1)", ids).Scan(&present); err != nil {
			return false, fmt.Sprintf("epoch %d at %s: %v", g.Epoch, g.Endpoint, err)
		}
		return true, ""
	})
	return len(ids) - present
}

// checkWriteHistory: the writes each primary (an endpoint at an epoch)
// acknowledged span a time no other's overlaps — two primaries never took
// writes in the same period.
func checkWriteHistory(t *testing.T, rows []ackedRow) {
	t.Helper()
	type span struct{ first, last time.Time }
	spans := map[string]*span{}
	for _, r := range rows {
		s, ok := spans[r.endpoint]
		if !ok {
			spans[r.endpoint] = &span{r.at, r.at}
			continue
		}
		if r.at.Before(s.first) {
			s.first = r.at
		}
		if r.at.After(s.last) {
			s.last = r.at
		}
	}
	for a, sa := range spans {
		for b, sb := range spans {
			if a < b && sa.first.Before(sb.last) && sb.first.Before(sa.last) {
				t.Errorf("two primaries took writes in the same period: %s from %s to %s, %s from %s to %s", a,
					sa.first.Format(time.RFC3339Nano), sa.last.Format(time.RFC3339Nano), b, sb.first.Format(time.RFC3339Nano), sb.last.Format(time.RFC3339Nano))
			}
		}
	}
}

// checkFleet: every live machine has exactly one agent process, no agent
// of this installation runs without a live machine, every replica is
// placed once.
func (e *faultEnv) checkFleet(t *testing.T) {
	t.Helper()
	waitFor(t, "a true fleet", func() (bool, string) {
		machines, err := e.h.api().ListMachines(context.Background(), "")
		if err != nil {
			return false, err.Error()
		}
		live := map[string]bool{}
		for _, m := range machines {
			if m.FleetState != api.FleetTerminated {
				live[m.ID] = true
			}
		}
		agents := agentsByMachine(machines)
		for id := range live {
			if n := len(agents[id]); n != 1 {
				return false, fmt.Sprintf("machine %s has %d agent processes", id, n)
			}
		}
		for id, pids := range agents {
			if !live[id] {
				return false, fmt.Sprintf("agent %v of machine %s runs, and the machine is not live: leaked", pids, id)
			}
		}
		replicas, err := e.h.api().ListReplicas(context.Background(), "")
		if err != nil {
			return false, err.Error()
		}
		perService := map[string]int{}
		for _, r := range replicas {
			if r.Machine == "" || !live[r.Machine] || r.State != api.ReplicaRunning {
				return false, fmt.Sprintf("replica %s is %s on %q", r.ID, r.State, r.Machine)
			}
			perService[r.Service]++
		}
		for svc, n := range perService {
			if n != 1 {
				return false, fmt.Sprintf("service %s has %d replicas", svc, n)
			}
		}
		return len(perService) == 2, fmt.Sprintf("%d services placed", len(perService))
	})
}

// agentsByMachine finds the agent processes of the installation's
// machines on this host, by their machine ids (drawn at random: no other
// process has them).
func agentsByMachine(machines []api.Machine) map[string][]int {
	ids := map[string]bool{}
	for _, m := range machines {
		ids[m.ID] = true
	}
	out := map[string][]int{}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		data, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(data), "\x00agent\x00") {
			continue
		}
		args := strings.Split(string(data), "\x00")
		i := slices.Index(args, "--machine-id")
		if i < 0 || i+1 >= len(args) || !ids[args[i+1]] || zombie(pidOf(p)) {
			continue
		}
		out[args[i+1]] = append(out[args[i+1]], pidOf(p))
	}
	return out
}

func pidOf(procPath string) int {
	pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(procPath)))
	return pid
}

// agentPID is the agent process of a machine (0 when none runs).
func agentPID(machine string) int {
	for _, pid := range agentsByMachine([]api.Machine{{ID: machine}})[machine] {
		return pid
	}
	return 0
}

// memberPID is the failover member (`gantry member`) an agent runs.
func memberPID(agent int) int {
	procs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range procs {
		stat, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) < 2 || fields[1] != strconv.Itoa(agent) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "cmdline"))
		if strings.Contains(string(cmdline), "\x00member\x00") {
			return pidOf(p)
		}
	}
	return 0
}

// faultWindow is the time from a fault's start to the next one's (or the
// schedule's end).
type faultWindow struct {
	kind       string
	start, end time.Time
}

// longestGap is the recovery time a client saw: the longest time in the
// window with no write acknowledged (from its start to the first write
// acknowledged in it, between two, or to its end).
func (w faultWindow) longestGap(rows []ackedRow) time.Duration {
	last, longest := w.start, time.Duration(0)
	for _, r := range rows {
		if r.at.Before(w.start) || r.at.After(w.end) {
			continue
		}
		longest, last = max(longest, r.at.Sub(last)), r.at
	}
	return max(longest, w.end.Sub(last))
}

// faultTotals are a soak's figures.
type faultTotals struct {
	mu        sync.Mutex
	runs      int
	faults    map[string]int
	outages   map[string][]time.Duration
	leaders   map[string][]time.Duration
	lost      int
	split     int
	failovers int
	lossyRuns int
	// refusals are automatic promotions refused (no synchronous standby);
	// forcedLost the writes then lost by promote --accept-data-loss.
	refusals   int
	forcedLost int
}

func (f *faultTotals) refusal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refusals++
}

func (f *faultTotals) forced(lost int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.forcedLost += lost
}

func newFaultTotals() *faultTotals {
	return &faultTotals{faults: map[string]int{}, outages: map[string][]time.Duration{}, leaders: map[string][]time.Duration{}}
}

// outage counts a fault with the longest time its client wrote nothing.
func (f *faultTotals) outage(kind string, d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults[kind]++
	f.outages[kind] = append(f.outages[kind], d)
}

// leader records how long a fault of the leader left the servers without
// one.
func (f *faultTotals) leader(kind string, d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if d > 0 {
		f.leaders[kind] = append(f.leaders[kind], d)
	}
}

func (f *faultTotals) run(lost, split, failovers int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.runs++
	f.lost += lost
	f.split += split
	f.failovers += failovers
	if lost > 0 {
		f.lossyRuns++
	}
}

func (f *faultTotals) summary() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var b strings.Builder
	total := 0
	for _, n := range f.faults {
		total += n
	}
	fmt.Fprintf(&b, "fault schedule: %d runs, %d faults, %d failovers, %d lost acknowledged writes (in %d runs), %d split-brain samples; %d automatic promotions refused (forced: %d writes lost)\n",
		f.runs, total, f.failovers, f.lost, f.lossyRuns, f.split, f.refusals, f.forcedLost)
	quantiles := func(d []time.Duration) string {
		slices.Sort(d)
		return fmt.Sprintf("p50 %.2fs p99 %.2fs", d[len(d)/2].Seconds(), d[min(len(d)-1, len(d)*99/100)].Seconds())
	}
	for _, kind := range faultKinds {
		fmt.Fprintf(&b, "  %-32s %4d", kind, f.faults[kind])
		if d := f.outages[kind]; len(d) > 0 {
			fmt.Fprintf(&b, "  writes resumed (longest gap) %s", quantiles(d))
		}
		if d := f.leaders[kind]; len(d) > 0 {
			fmt.Fprintf(&b, "  new leader %s", quantiles(d))
		}
		b.WriteString("\n")
	}
	return b.String()
}
