package e2e

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
)

// memberOf is the group's member in a cluster.
func memberOf(g *api.FailoverGroupInfo, cluster string) api.FailoverMember {
	for _, m := range g.Members {
		if m.Cluster == cluster {
			return m
		}
	}
	return api.FailoverMember{}
}

// A synchronous group whose standby stops streaming (still running and
// healthy, as after a network cut between the two): the primary waits for
// it until the server has recorded that it has no synchronous standby,
// then acknowledges writes alone. When the primary dies then, the stale
// standby is not promoted automatically — that would discard the
// acknowledged writes — the group waits in PrimaryFailed saying why, and
// a plain manual promote is refused; `promote --accept-data-loss` does it.
func TestStaleStandbyIsNotPromoted(t *testing.T) {
	s := startFailover(t, nil)
	g := s.waitGroup(t, "the replica recorded as the synchronous standby", func(g *api.FailoverGroupInfo) bool { return g.SyncStandby == "west" })
	standby := memberOf(g, "west")

	// The standby stops streaming: its WAL receiver is pointed nowhere.
	ctx := context.Background()
	conn, err := pgConnect(ctx, standby.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{"ALTER SYSTEM SET primary_conninfo = 'host=127.0.0.1 port=1 connect_timeout=1'", "SELECT pg_reload_conf()", "SELECT pg_terminate_backend(pid) FROM pg_stat_wal_receiver"} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	conn.Close(ctx)
	s.waitGroup(t, "the primary reporting no synchronous standby", func(g *api.FailoverGroupInfo) bool {
		m := memberOf(g, "west")
		return g.SyncStandby == "" && m.Replication != nil && !m.Replication.Streaming && m.Serving
	})

	w, stopWriter := startWriter(t, s)
	waitFor(t, "writes acknowledged by the primary alone", func() (bool, string) { return len(w.rows()) >= 30, "" })
	stopWriter()
	before := s.group(t)
	killMachine(t, s.dataDir, primaryMachine(before))
	failed := s.waitGroup(t, "the group waiting in PrimaryFailed", func(g *api.FailoverGroupInfo) bool {
		return g.Phase == "PrimaryFailed" && strings.Contains(g.Message, "not the synchronous standby")
	})
	// Many control-loop passes later (counted, not slept) it has still not
	// promoted the stale standby.
	waitPasses(t, s.dataDir, s.url, 40)
	if g := s.group(t); g.Epoch != before.Epoch || g.Primary != "east" {
		t.Fatalf("the stale standby was promoted: %+v", *g)
	}
	out, errOut, code := s.gantry("failover", "promote", "pg")
	if code == 0 || !strings.Contains(out+errOut, "--accept-data-loss") {
		t.Fatalf("a plain promote of a stale standby: exit %d %s%s, want a refusal naming --accept-data-loss", code, out, errOut)
	}
	if g := s.group(t); g.Epoch != before.Epoch {
		t.Fatalf("a plain promote of a stale standby went ahead: %+v", *g)
	}
	events, _, _ := s.gantry("get", "events")
	for _, want := range []string{"SynchronousStandbyLost", "NotPromoting"} {
		if !strings.Contains(events, want) {
			t.Fatalf("events lack %q:\n%s", want, events)
		}
	}
	if out, errOut, code := s.gantry("failover", "promote", "pg", "--accept-data-loss"); code != 0 {
		t.Fatalf("failover promote --accept-data-loss: %s%s", out, errOut)
	}
	s.waitGroup(t, "the stale standby promoted on request", func(g *api.FailoverGroupInfo) bool {
		return g.Epoch == before.Epoch+1 && g.Primary == "west" && g.Endpoint != ""
	})
	t.Logf("%s; promoted only with --accept-data-loss", failed.Message)
}

// The primary's agent is stopped (SIGSTOP): it renews nothing and stops
// nothing, but the member holds the lease itself and fences PostgreSQL
// when the lease's end passes by its clock — before the lease has run out
// for the server (before, PostgreSQL stayed writable until the server's
// fence, 22 s with a 10 s lease). The group then fails over.
func TestStoppedAgentsPrimaryFencesItself(t *testing.T) {
	s := startFailover(t, nil)
	before := s.group(t)
	primary := memberOf(before, before.Primary)
	agent := agentPID(primary.Machine)
	if agent == 0 {
		t.Fatal("no agent process for the primary's machine")
	}
	if !acceptsWrites(primary.Endpoint) {
		t.Fatal("the primary does not accept writes before the fault")
	}
	stopped := time.Now()
	if err := syscall.Kill(agent, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(agent, syscall.SIGCONT) })
	var fenced time.Duration
	waitFor(t, "the primary fenced by its member", func() (bool, string) {
		if acceptsWrites(primary.Endpoint) {
			return false, "still accepts writes"
		}
		fenced = time.Since(stopped)
		return true, ""
	})
	const lease = 4 * time.Second
	if fenced >= lease {
		t.Fatalf("the primary accepted writes %.2f s after its agent stopped: not before its lease (%s) ran out", fenced.Seconds(), lease)
	}
	s.waitGroup(t, "the replica promoted", func(g *api.FailoverGroupInfo) bool { return g.Epoch == before.Epoch+1 && g.Endpoint != "" })
	t.Logf("the primary stopped accepting writes %.2f s after its agent was stopped (lease %s)", fenced.Seconds(), lease)
}
