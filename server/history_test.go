package server

import (
	"context"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/client"
)

// Each server samples the fleet every History.Interval and keeps the last
// History.Length samples: what the live machines offer and their replicas
// request, and how many heartbeats it took in, with their 99th percentile.
func TestHistoryKeepsBoundedSamplesOfTheFleet(t *testing.T) {
	ts, ctx := withTestCluster(t, func(c *Config) { c.History = HistoryConfig{Interval: 50 * time.Millisecond, Length: 4} })
	agent := client.New(ts.URL(), ts.joinManual(t, "dev", "m1"), ts.http)
	applyWebOnM1(t, ts)
	var seen api.HistorySample
	var beats uint64
	waitFor(t, 10*time.Second, "a sample of m1 with web-0 on it after a heartbeat", func() bool {
		if _, err := agent.Heartbeat(ctx, "m1", api.HeartbeatRequest{}); err != nil {
			t.Fatal(err)
		}
		h, err := ts.admin.History(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(h.Samples) > 4 || h.Interval != "50ms" {
			t.Fatalf("history of %d samples every %s, want at most 4 every 50ms", len(h.Samples), h.Interval)
		}
		beats = 0
		for _, s := range h.Samples {
			beats += s.Heartbeats
			if s.Heartbeats > 0 && s.HeartbeatP99Seconds <= 0 {
				t.Fatalf("a sample counts %d heartbeats and no time: %+v", s.Heartbeats, s)
			}
		}
		seen = h.Samples[len(h.Samples)-1]
		return beats > 0 && seen.Allocated.MilliCPU == 100 && seen.Allocatable.MilliCPU > 0
	})
	if seen.Allocated.MemoryBytes != 64<<20 || seen.Pending != 0 {
		t.Errorf("the last sample %+v, want web-0's 64Mi requested and nothing pending", seen)
	}
	if _, err := agent.History(ctx); !client.IsStatus(err, http.StatusForbidden) {
		t.Errorf("a machine credential reading the history: %v, want 403", err)
	}
}

func TestQuantileBoundIsTheBucketHoldingTheQuantile(t *testing.T) {
	bounds := []float64{0.001, 0.01, 0.1, math.Inf(1)}
	for _, c := range []struct {
		cumulative []uint64
		want       float64
	}{
		{[]uint64{0, 0, 0, 0}, 0},
		{[]uint64{100, 100, 100, 100}, 0.001},
		{[]uint64{98, 99, 100, 100}, 0.01},
		{[]uint64{50, 98, 99, 100}, 0.1},
		{[]uint64{0, 0, 0, 7}, 0.1}, // beyond the last bound: the largest finite one
	} {
		if got := quantileBound(bounds, c.cumulative, 0.99); got != c.want {
			t.Errorf("p99 of %v: %v, want %v", c.cumulative, got, c.want)
		}
	}
}

// The dashboard's terminal is the API's exec, relayed to the agent, with
// the signed-in admin's token; it is audited as the CLI's is.
func TestDashboardShellIsTheAPIsExec(t *testing.T) {
	ts, ctx := withTestCluster(t, nil)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	agent := client.New(ts.URL(), ts.joinManual(t, "dev", "m1"), ts.http)
	applyWebOnM1(t, ts)
	hc, _ := ts.signedIn(t, ts.AdminToken())
	browser, _, err := websocket.Dial(ctx, ts.URL()+"/ui/replicas/web-0/exec?command=sh&stdin=true&tty=true", &websocket.DialOptions{HTTPClient: hc})
	if err != nil {
		t.Fatalf("the dashboard's shell: %v", err)
	}
	defer browser.CloseNow()
	req, conn := agentStream(t, ctx, agent, api.StreamExec)
	defer conn.CloseNow()
	if req.ReplicaID != "web-0" || !req.TTY || !req.Stdin || len(req.Command) != 1 || req.Command[0] != "sh" {
		t.Fatalf("the agent was asked %+v", req)
	}
	if err := browser.Write(ctx, websocket.MessageBinary, append([]byte{api.ChannelStdin}, "ls\r"...)); err != nil {
		t.Fatal(err)
	}
	if ch, data := readFrame(t, ctx, conn); ch != api.ChannelStdin || data != "ls\r" {
		t.Fatalf("the agent got %d %q, want the browser's keys", ch, data)
	}
	if err := conn.Write(ctx, websocket.MessageBinary, append([]byte{api.ChannelStdout}, "bin etc\r\n"...)); err != nil {
		t.Fatal(err)
	}
	if ch, data := readFrame(t, ctx, browser); ch != api.ChannelStdout || data != "bin etc\r\n" {
		t.Fatalf("the browser got %d %q, want the shell's output", ch, data)
	}
	waitFor(t, 10*time.Second, "an audit event of the dashboard's exec", func() bool {
		events, err := ts.admin.ListEvents(ctx, client.EventQuery{Kind: "Audit"})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range events {
			if strings.Contains(e.Message, "exec in replica web-0: sh") {
				return true
			}
		}
		return false
	})
}
