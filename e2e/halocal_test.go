package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/client"
	"github.com/gantry-dev/gantry/store/postgres/pgtest"
)

// placement is what must not change when the leader does: each live
// machine's instance, and where each replica runs and how often it
// restarted.
func (h *haCluster) placement(t *testing.T) (map[string]string, map[string]string) {
	t.Helper()
	machines, err := h.api().ListMachines(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	instances := map[string]string{}
	for _, m := range machines {
		if m.FleetState != api.FleetTerminated {
			instances[m.ID] = m.ProviderID
		}
	}
	replicas, err := h.api().ListReplicas(context.Background(), "web")
	if err != nil {
		t.Fatal(err)
	}
	where := map[string]string{}
	for _, r := range replicas {
		where[r.ID] = fmt.Sprintf("%s on %s, %d restarts", r.State, r.Machine, r.Restarts)
	}
	return instances, where
}

// Three servers on PostgreSQL whose machines are local agent processes;
// each server keeps its own data dir. The leader is killed (SIGKILL): the
// new leader finds every machine on the host by its tags, and keeps them
// all, with their replicas running where they ran (before, it found no
// instance in its own state file, terminated every machine and launched
// them anew: a full outage at every leader change). `gantry logs` keeps
// working through the servers that remain.
func TestHALocalMachinesSurviveALeaderKill(t *testing.T) {
	h := newHAWith(t, 3, pgtest.URL(t), true)
	first := h.leader()
	h.apply(haSpecOf("local", "local.medium", 2, "1"))
	waitFor(t, "web answering", func() (bool, string) { return h.webAnswers("1") })
	instances, where := h.placement(t)

	h.kill(first)
	second := h.leader(first)
	waitPasses(t, second.dataDir, second.url, 15) // it has listed its provider and judged every machine
	waitFor(t, "web answering after the leader change", func() (bool, string) { return h.webAnswers("1") })
	afterInstances, afterWhere := h.placement(t)
	if fmt.Sprint(afterInstances) != fmt.Sprint(instances) {
		t.Fatalf("machines changed with the leader:\nbefore %v\nafter  %v", instances, afterInstances)
	}
	if fmt.Sprint(afterWhere) != fmt.Sprint(where) {
		t.Fatalf("replicas moved or restarted with the leader:\nbefore %v\nafter  %v", where, afterWhere)
	}
	events, err := h.api().ListEvents(context.Background(), client.EventQuery{Kind: "Machine"})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		if strings.Contains(e.Message, "no longer exists") || e.Reason == "Terminating" {
			t.Fatalf("the new leader judged a machine gone: %s %s", e.Reason, e.Message)
		}
	}
	replicas, err := h.api().ListReplicas(context.Background(), "web")
	if err != nil || len(replicas) == 0 {
		t.Fatalf("replicas: %v %v", replicas, err)
	}
	// The CLI is given every server, the dead one first.
	servers := strings.Join(append([]string{first.url}, second.url), ",")
	out, errOut, code := runGantry(t, "--server", servers, "--token", haToken, "--ca-cert", caPath(first), "logs", replicas[0].ID, "--tail", "3")
	if code != 0 || !strings.Contains(out, "hello listening") {
		t.Fatalf("gantry logs after the leader change: exit %d %q %s", code, out, errOut)
	}
}

// caPath is the CA certificate the servers of an installation share.
func caPath(s *haServer) string { return filepath.Join(s.dataDir, "ca.crt") }
