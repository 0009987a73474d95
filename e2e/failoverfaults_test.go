package e2e

import (
	"context"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
)

// The primary's agent loses the server (its TCP proxy is cut): the
// agent stops the primary before its lease runs out, the server promotes
// the replica only after, and a client that keeps writing to the old
// primary's address never succeeds after the promotion.
func TestFailoverPartitionedPrimaryStopsItself(t *testing.T) {
	var proxy *pidProxy
	s := startFailover(t, func(serverURL string) string {
		proxy = startPIDProxy(t, hostPort(serverURL))
		return strings.Replace(serverURL, hostPort(serverURL), proxy.addr(), 1)
	}, "--reschedule-grace", "10m") // only the failover may stop the partitioned machine
	sampler, stopSampler := startSampler(t, s)
	before := s.group(t)
	old := startStubbornWriter(t, before.Endpoint)

	cut := time.Now()
	proxy.cutAll()
	after := s.waitGroup(t, "the replica promoted", func(g *api.FailoverGroupInfo) bool {
		return g.Epoch == before.Epoch+1 && g.Primary == "west" && g.Endpoint != ""
	})
	tried := old.attempts()
	waitFor(t, "the old address tried again after the promotion", func() (bool, string) { return old.attempts() > tried+10, "" })
	lastOld := old.stop()
	stopSampler()
	sampler.check(t)
	promoted := *after.LastFailover
	if !lastOld.Before(promoted) {
		t.Fatalf("split brain: the old primary acknowledged a write at %s, after the promotion at %s", lastOld.Format(time.RFC3339Nano), promoted.Format(time.RFC3339Nano))
	}
	if lease := cut.Add(4 * time.Second); !lastOld.Before(lease) {
		t.Fatalf("the old primary acknowledged a write at %s, after its lease ran out (%s at the latest)", lastOld.Format(time.RFC3339Nano), lease.Format(time.RFC3339Nano))
	}
	machine := primaryMachine(before)
	if n := agentLogCount(s.dataDir, instanceOf(t, s.dataDir, machine).ID, "lease not renewed in time: stopping the failover primary"); n == 0 {
		t.Fatalf("the partitioned agent did not stop its primary by itself")
	}
	t.Logf("proxy cut at %s; the old primary's last write %.2f s later; promotion %.2f s later",
		cut.Format(time.RFC3339Nano), lastOld.Sub(cut).Seconds(), promoted.Sub(cut).Seconds())
}

// The server is killed (kill -9) at a random point of a failover, and
// again during a revert: the next server finishes each, and at no
// sampled instant do two sides accept writes.
func TestFailoverSurvivesServerKills(t *testing.T) {
	s := startFailover(t, nil)
	sampler, stopSampler := startSampler(t, s)
	w, stopWriter := startWriter(t, s)
	waitFor(t, "rows committed", func() (bool, string) { return len(w.rows()) >= 20, "" })

	before := s.group(t)
	killMachine(t, s.dataDir, primaryMachine(before))
	s = restartAfter(t, s, time.Duration(rand.Int64N(int64(6*time.Second))))
	s.waitGroup(t, "the failover finished by the next server", func(g *api.FailoverGroupInfo) bool {
		return g.Phase == "Healthy" && g.Epoch == before.Epoch+1 && g.Primary == "west"
	})

	// A switchover goes to the synchronous standby only.
	s.waitGroup(t, "east the synchronous standby", func(g *api.FailoverGroupInfo) bool { return g.SyncStandby == "east" })
	epoch := s.group(t).Epoch
	if _, errOut, code := s.gantry("failover", "revert", "pg"); code != 0 {
		t.Fatalf("revert: %s", errOut)
	}
	s = restartAfter(t, s, time.Duration(rand.Int64N(int64(3*time.Second))))
	s.waitGroup(t, "the revert finished by the next server", func(g *api.FailoverGroupInfo) bool {
		return g.Phase == "Healthy" && g.Epoch == epoch+1 && g.Primary == "east"
	})
	n := len(w.rows())
	waitFor(t, "writes after the revert", func() (bool, string) { return len(w.rows()) > n+20, "" })
	stopWriter()
	checkNoRowLost(t, s, w)
	stopSampler()
	sampler.check(t)
}

// restartAfter kills the server -9 after delay and starts another on its
// data dir and address (the writer and the sampler keep the first one's
// client: same address, token and CA).
func restartAfter(t *testing.T, s *server, delay time.Duration) *server {
	t.Helper()
	time.Sleep(delay)
	s.kill()
	t.Logf("server killed %.1f s into the step", delay.Seconds())
	return startServer(t, s.dataDir, "--listen", hostPort(s.url))
}

// stubbornWriter keeps writing to one address, whatever the group says.
type stubbornWriter struct {
	mu     sync.Mutex
	lastOK time.Time
	tries  int
	done   chan struct{}
	cancel context.CancelFunc
}

func startStubbornWriter(t *testing.T, endpoint string) *stubbornWriter {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &stubbornWriter{done: make(chan struct{}), cancel: cancel}
	conn, err := pgConnect(ctx, endpoint)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE IF NOT EXISTS stubborn (at timestamptz)"); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	go func() {
		defer close(w.done)
		for {
			w.try(ctx, endpoint)
			select { // a client retrying at its own pace
			case <-ctx.Done():
				return
			case <-time.After(reconnectEvery):
			}
		}
	}()
	return w
}

func (w *stubbornWriter) attempts() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.tries
}

func (w *stubbornWriter) try(ctx context.Context, endpoint string) {
	w.mu.Lock()
	w.tries++
	w.mu.Unlock()
	callCtx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	conn, err := pgConnect(callCtx, endpoint)
	if err != nil {
		return
	}
	defer conn.Close(context.Background())
	for callCtx.Err() == nil {
		if _, err := conn.Exec(callCtx, "INSERT INTO stubborn VALUES (now())"); err != nil {
			return
		}
		w.mu.Lock()
		w.lastOK = time.Now()
		w.mu.Unlock()
	}
}

// stop ends the writer and returns when it last succeeded.
func (w *stubbornWriter) stop() time.Time {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastOK
}
