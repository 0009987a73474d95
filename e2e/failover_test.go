package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
)

// A writer commits through the primary; the primary's machine is killed
// (kill -9): the replica is promoted after the lease, and with
// synchronous replication every acknowledged row is on it. Then the old
// side comes back as a replica, a revert and a manual promote round
// trip, losing nothing; at no sampled instant do two sides accept
// writes.
func TestFailoverPostgres(t *testing.T) {
	needHAProxy(t)
	port := freeTCPPort(t)
	exposed := func(spec string) string {
		return strings.Replace(spec, "    ports: [{name: postgres}]\n", fmt.Sprintf("    ports: [{name: postgres}]\n    expose: [{port: %d}]\n", port), 1)
	}
	s := startFailoverEdited(t, exposed, nil)
	sampler, stopSampler := startSampler(t, s)
	w, stopWriter := startWriter(t, s)
	waitFor(t, "rows committed", func() (bool, string) { return len(w.rows()) >= 50, "" })

	before := s.group(t)
	// The group's name, as the replica's machine answers it, sampled every
	// 50 ms through the failover: the old primary, then (after fencing,
	// when it answers none) the new one, never both, never the old again.
	names, stopNames := startNameSampler(t, machineDNS(t, s, memberMachine(before, "west")), "_postgres._tcp.pg.west.gantry.", 50*time.Millisecond)
	// And the group's exposed port (HAProxy on every machine of both
	// clusters, sharing the port on this host): a connection through it
	// reaches the primary or nothing, never a replica, and never the old
	// primary once the new one answered.
	waitFor(t, "the exposed port reaching the primary", func() (bool, string) {
		answer, err := primaryBehind(port)
		return answer == before.Endpoint, fmt.Sprint(answer, err)
	})
	ingress, stopIngress := startIngressSampler(t, port, 50*time.Millisecond)
	waitFor(t, "the exposed port sampled", func() (bool, string) {
		ingress.mu.Lock()
		defer ingress.mu.Unlock()
		return slices.Contains(ingress.answers, before.Endpoint), strings.Join(ingress.answers, " ")
	})
	killed := time.Now()
	killMachine(t, s.dataDir, primaryMachine(before))
	after := s.waitGroup(t, "the replica promoted", func(g *api.FailoverGroupInfo) bool {
		return g.Epoch == before.Epoch+1 && g.Primary == "west" && g.Endpoint != ""
	})
	waitFor(t, "the name answering the new primary", func() (bool, string) {
		names.mu.Lock()
		defer names.mu.Unlock()
		return slices.Contains(names.answers, after.Endpoint), strings.Join(names.answers, " ")
	})
	stopNames()
	names.checkFollows(t, before.Endpoint, after.Endpoint)
	waitFor(t, "the exposed port reaching the new primary", func() (bool, string) {
		ingress.mu.Lock()
		defer ingress.mu.Unlock()
		return slices.Contains(ingress.answers, after.Endpoint), strings.Join(ingress.answers, " ")
	})
	stopIngress()
	ingress.checkFollows(t, before.Endpoint, after.Endpoint)
	var resumed ackedRow
	waitFor(t, "writes on the new primary", func() (bool, string) {
		var ok bool
		resumed, ok = w.firstAfter(killed, before.Endpoint)
		return ok, ""
	})
	t.Logf("failover: the new primary %s acknowledged a write %.1f s after the old primary's machine was killed (lease 4 s)",
		after.Endpoint, resumed.at.Sub(killed).Seconds())
	stopWriter()
	checkNoRowLost(t, s, w)
	events, _, _ := s.gantry("get", "events")
	for _, want := range []string{"PrimaryFailed", "Fenced", "Promoted", "epoch 2"} {
		if !strings.Contains(events, want) {
			t.Fatalf("events lack %q:\n%s", want, events)
		}
	}

	s.waitGroup(t, "the old side back as a replica", func(g *api.FailoverGroupInfo) bool { return g.Phase == "Healthy" })
	w, stopWriter = startWriter(t, s)
	for _, step := range []struct{ action, primary string }{{"revert", "east"}, {"promote", "west"}, {"revert", "east"}} {
		// A planned switchover goes to the synchronous standby only.
		s.waitGroup(t, step.primary+" the synchronous standby", func(g *api.FailoverGroupInfo) bool { return g.Phase == "Healthy" && g.SyncStandby == step.primary })
		epoch := s.group(t).Epoch
		if out, errOut, code := s.gantry("failover", step.action, "pg", "--wait"); code != 0 {
			t.Fatalf("failover %s: %s%s", step.action, out, errOut)
		}
		g := s.waitGroup(t, step.action+" done", func(g *api.FailoverGroupInfo) bool {
			return g.Phase == "Healthy" && g.Epoch == epoch+1 && g.Primary == step.primary
		})
		n := len(w.rows())
		waitFor(t, "writes after "+step.action, func() (bool, string) { return len(w.rows()) > n+20, "" })
		t.Logf("%s: %s primary at epoch %d", step.action, g.Primary, g.Epoch)
	}
	stopWriter()
	checkNoRowLost(t, s, w)
	stopSampler()
	sampler.check(t)
	status, _, _ := s.gantry("failover", "status", "pg")
	for _, want := range []string{"Phase:     Healthy", "Primary:   east", "replica   replica   true"} {
		if !strings.Contains(status, want) {
			t.Fatalf("status lacks %q:\n%s", want, status)
		}
	}
}

func memberMachine(g *api.FailoverGroupInfo, cluster string) string {
	for _, m := range g.Members {
		if m.Cluster == cluster {
			return m.Machine
		}
	}
	return ""
}

// machineDNS is where a machine's agent answers names.
func machineDNS(t *testing.T, s *server, machine string) string {
	t.Helper()
	var addr string
	waitFor(t, "machine "+machine+" answering names", func() (bool, string) {
		m, err := s.api.GetMachine(context.Background(), machine)
		if err == nil {
			addr = m.DNSAddress
		}
		return addr != "", fmt.Sprint(err)
	})
	return addr
}

// primaryBehind connects through an exposed port and says which server
// answered (127.0.0.1:<its port>), or "" when none did; an answer from a
// server in recovery (a replica) is an error.
func primaryBehind(port int) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	conn, err := pgConnect(ctx, fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return "", err
	}
	defer conn.Close(context.Background())
	var inRecovery bool
	var serverPort int
	if err := conn.QueryRow(ctx, "SELECT pg_is_in_recovery(), current_setting('port')::int").Scan(&inRecovery, &serverPort); err != nil {
		return "", err
	}
	answer := fmt.Sprintf("127.0.0.1:%d", serverPort)
	if inRecovery {
		return answer, fmt.Errorf("%s answered through the exposed port in recovery (a replica)", answer)
	}
	return answer, nil
}

// startIngressSampler connects through an exposed port every interval
// and keeps the distinct servers that answered, in order ("" for none);
// an answer from a replica is kept as "replica <server>", which
// checkFollows never expects.
func startIngressSampler(t *testing.T, port int, interval time.Duration) (*nameSampler, func()) {
	t.Helper()
	ns := &nameSampler{}
	stop := every(interval, func() {
		answer, err := primaryBehind(port)
		if err != nil && answer != "" {
			answer = "replica " + answer
		}
		ns.mu.Lock()
		defer ns.mu.Unlock()
		ns.samples++
		if strings.HasPrefix(answer, "replica ") {
			ns.both = append(ns.both, answer)
		}
		if n := len(ns.answers); n == 0 || ns.answers[n-1] != answer {
			ns.answers = append(ns.answers, answer)
		}
	})
	return ns, stop
}
