package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/client"
)

// What a heartbeat says its replicas use is answered by GET /v1/usage,
// summed per machine, together with what the machines heartbeating to
// the other servers reported there (the newest report of a machine wins);
// a peer that does not answer is named, not fatal.
func TestUsageComesFromHeartbeatsAndPeers(t *testing.T) {
	peerReport := api.UsageReport{Machines: []api.MachineUsage{
		{Machine: "m1", At: time.Now().Add(-time.Hour), Usage: api.Usage{MilliCPU: 1}},
		{Machine: "m9", At: time.Now(), Usage: api.Usage{MilliCPU: 900}, Replicas: map[string]api.Usage{"far-0": {MilliCPU: 900}}},
	}}
	peer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("local") != "true" || r.Header.Get("Authorization") == "" {
			http.Error(w, "want local=true with the caller's token", http.StatusBadRequest)
			return
		}
		_ = json.NewEncoder(w).Encode(peerReport)
	}))
	defer peer.Close()
	ts, ctx := withTestCluster(t, func(c *Config) {
		c.TLS.Disabled = true // plain HTTP between the servers, as a dev host's
		c.AgentServers = []string{peer.URL, "http://127.0.0.1:1"}
	})
	agent := client.New(ts.URL(), ts.joinManual(t, "dev", "m1"), ts.http)
	usage := map[string]api.Usage{"web-0": {MilliCPU: 250, MemoryBytes: 64 << 20}, "web-1": {MilliCPU: 50, MemoryBytes: 32 << 20}}
	if _, err := agent.Heartbeat(ctx, "m1", api.HeartbeatRequest{Usage: usage, Sequence: time.Now().UnixNano()}); err != nil {
		t.Fatal(err)
	}
	report, err := ts.admin.Usage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(report.Machines) != 2 || len(report.Unreached) != 1 {
		t.Fatalf("report %+v, want m1 (here) and m9 (the peer's), and the dead peer named", report)
	}
	m1 := report.Machines[0]
	if m1.Machine != "m1" || m1.Usage.MilliCPU != 300 || m1.Usage.MemoryBytes != 96<<20 || m1.Replicas["web-0"].MilliCPU != 250 {
		t.Errorf("m1: %+v, want this server's newer report, summed", m1)
	}
	if m9 := report.Machines[1]; m9.Machine != "m9" || m9.Replicas["far-0"].MilliCPU != 900 {
		t.Errorf("m9: %+v, want the peer's", m9)
	}
}
