package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/failover/member"
	"github.com/gantry-dev/gantry/internal/atomicfile"
	clocktesting "k8s.io/utils/clock/testing"
)

func memberAssignment(id, group, role string, command ...string) api.Assignment {
	as := assignment(id, "h1", command...)
	as.Spec.Failover = &api.FailoverMemberSpec{Group: group, Home: "primary"}
	as.Failover = &api.FailoverAssignment{Group: group, Role: role, Epoch: 3, LeaseSeconds: 1}
	return as
}

// A primary whose lease the agent cannot renew is stopped before the
// lease runs out; a replica keeps running, as every replica does while
// the server is away. The role reaches the member through its file, and
// the member's report reaches the server.
func TestUnrenewedPrimaryStopsReplicaKeepsRunning(t *testing.T) {
	fs, dir := startAgent(t)
	run := "echo $$ > pid; echo '{\"role\":\"primary\",\"epoch\":3,\"serving\":true}' > $GANTRY_FAILOVER_DIR/status.json; exec sleep 300"
	fs.set(memberAssignment("pg-0", "pg", api.RolePrimary, "sh", "-c", run), memberAssignment("other-0", "other", api.RoleReplica, "sh", "-c", "echo $$ > pid; exec sleep 300"))
	primaryPid := filepath.Join(dir, "replicas", "pg-0", "pid")
	replicaPid := filepath.Join(dir, "replicas", "other-0", "pid")
	eventually(t, "both running, the member's report sent", func() bool {
		st, ok := fs.status("pg-0")
		return ok && fileExists(primaryPid) && fileExists(replicaPid) && st.Member != nil && st.Member.Serving && st.Member.Epoch == 3
	})
	var role api.FailoverAssignment
	if found, err := atomicfile.ReadJSON(filepath.Join(dir, "failover", "pg", member.RoleFile), &role); !found || err != nil || role.Role != api.RolePrimary {
		t.Fatalf("role file: %+v %v %v", role, found, err)
	}
	// The member holds the lease too: the role says when it runs out
	// (LeaseStopAfter of the 1 s lease after the last renewal sent).
	if role.LeaseExpiresAt == nil || time.Until(*role.LeaseExpiresAt) > 750*time.Millisecond {
		t.Fatalf("the primary's role carries lease expiry %v, want within 750ms of now", role.LeaseExpiresAt)
	}
	primary, replica := strings.TrimSpace(readFile(primaryPid)), strings.TrimSpace(readFile(replicaPid))
	fs.mu.Lock()
	fs.down = true
	fs.mu.Unlock()
	eventually(t, "the primary stopped", func() bool { return !fileExists("/proc/" + primary) })
	if !fileExists("/proc/" + replica) {
		t.Fatal("the replica stopped too")
	}
	if found, _ := atomicfile.ReadJSON(filepath.Join(dir, "failover", "pg", member.RoleFile), &role); !found || role.Role != api.RoleFenced {
		t.Fatalf("the member was not told it is fenced: %+v", role)
	}
	// The server answers again, and the group made the other side
	// primary meanwhile: the member is told it is a replica at epoch 4
	// before it runs again.
	demoted := memberAssignment("pg-0", "pg", api.RoleReplica, "sh", "-c", "echo $$ > pid; exec sleep 300")
	demoted.Failover.Epoch, demoted.Failover.Primary = 4, "10.0.0.9:5432"
	fs.set(demoted, memberAssignment("other-0", "other", api.RoleReplica, "sh", "-c", "echo $$ > pid; exec sleep 300"))
	fs.mu.Lock()
	fs.down = false
	fs.mu.Unlock()
	eventually(t, "the member restarted, told its new role", func() bool {
		now := strings.TrimSpace(readFile(primaryPid))
		found, _ := atomicfile.ReadJSON(filepath.Join(dir, "failover", "pg", member.RoleFile), &role)
		return found && role.Role == api.RoleReplica && role.Epoch == 4 && now != "" && now != primary
	})
	if _, err := os.Stat("/proc/" + replica); err != nil {
		t.Fatal("the replica restarted")
	}
}

// The agent's own lease watch on an injected clock: a primary whose
// renewals stop being answered is stopped once LeaseStopAfter of its lease
// has passed since the last renewal sent, not a moment before — without
// the test waiting for time to pass.
func TestLeaseSelfStopOnAFakeClock(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	fs, dir, _ := startAgentWith(t, func(c *Config) { c.LeaseClock, c.LeaseCheckInterval = clk, 10*time.Millisecond })
	run := "echo $$ > pid; echo '{\"role\":\"primary\",\"epoch\":3,\"serving\":true}' > $GANTRY_FAILOVER_DIR/status.json; exec sleep 300"
	as := memberAssignment("pg-0", "pg", api.RolePrimary, "sh", "-c", run)
	as.Failover.LeaseSeconds = 8 // the agent stops the primary 6 s after the last renewal sent
	fs.set(as)
	pidFile := filepath.Join(dir, "replicas", "pg-0", "pid")
	eventually(t, "the primary running", func() bool { st, ok := fs.status("pg-0"); return ok && fileExists(pidFile) && st.Member != nil })
	pid := strings.TrimSpace(readFile(pidFile))
	fs.mu.Lock()
	fs.down = true
	fs.mu.Unlock()
	tick := func(d time.Duration) {
		t.Helper()
		eventually(t, "the lease watch waiting on its clock", clk.HasWaiters)
		clk.Step(d)
		eventually(t, "the lease watch to look", clk.HasWaiters)
	}
	for range 5 { // 5 s since the last renewal: within 0.75 × 8 s
		tick(time.Second)
	}
	if !fileExists("/proc/" + pid) {
		t.Fatal("the primary stopped before LeaseStopAfter of its lease")
	}
	tick(1100 * time.Millisecond)
	eventually(t, "the primary stopped", func() bool { return !fileExists("/proc/" + pid) })
	var role api.FailoverAssignment
	if found, _ := atomicfile.ReadJSON(filepath.Join(dir, "failover", "pg", member.RoleFile), &role); !found || role.Role != api.RoleFenced {
		t.Fatalf("the member was not told it is fenced: %+v", role)
	}
}

// An answer sent before the server went away and received after the
// lease it renews ran out must not start the primary again: the lease
// watch fenced it, and the late answer leaves it fenced.
func TestLateAnswerDoesNotRestartAFencedPrimary(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	fs, dir, _ := startAgentWith(t, func(c *Config) { c.LeaseClock, c.LeaseCheckInterval = clk, 10*time.Millisecond })
	run := "echo $$ > pid; echo '{\"role\":\"primary\",\"epoch\":3,\"serving\":true}' > $GANTRY_FAILOVER_DIR/status.json; exec sleep 300"
	as := memberAssignment("pg-0", "pg", api.RolePrimary, "sh", "-c", run)
	as.Failover.LeaseSeconds = 8 // stopped 6 s after the last renewal sent
	fs.set(as)
	pidFile := filepath.Join(dir, "replicas", "pg-0", "pid")
	eventually(t, "the primary running", func() bool { st, ok := fs.status("pg-0"); return ok && fileExists(pidFile) && st.Member != nil })
	pid := strings.TrimSpace(readFile(pidFile))
	release := make(chan struct{})
	fs.mu.Lock()
	fs.hold = release
	fs.mu.Unlock()
	eventually(t, "a heartbeat waiting for its answer", func() bool { fs.mu.Lock(); defer fs.mu.Unlock(); return fs.held > 0 })
	fs.mu.Lock()
	fs.hold, fs.down = nil, true // the ones after it are refused
	fs.mu.Unlock()
	for range 7 { // past 6 s since that heartbeat was sent
		eventually(t, "the lease watch waiting on its clock", clk.HasWaiters)
		clk.Step(time.Second)
	}
	eventually(t, "the primary stopped", func() bool { return !fileExists("/proc/" + pid) })
	refused := func() int { fs.mu.Lock(); defer fs.mu.Unlock(); return fs.refused }
	before := refused()
	close(release) // the late answer: the primary, renewed as of its sending
	eventually(t, "the heartbeat after the late answer", func() bool { return refused() > before })
	var role api.FailoverAssignment
	if found, _ := atomicfile.ReadJSON(filepath.Join(dir, "failover", "pg", member.RoleFile), &role); !found || role.Role != api.RoleFenced {
		t.Fatalf("after the late answer the member's role is %+v, want fenced", role)
	}
	if fileExists(pidFile) && strings.TrimSpace(readFile(pidFile)) != pid {
		t.Fatal("the late answer started the primary again")
	}
}
