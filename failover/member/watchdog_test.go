package member_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/failover/member"
	"github.com/gantry-dev/gantry/internal/atomicfile"
	clocktesting "k8s.io/utils/clock/testing"
)

// recorder is a capability that records what the member has it do.
type recorder struct {
	mu      sync.Mutex
	calls   []string
	serving bool
	exited  chan struct{}
}

func (r *recorder) record(call string, serving bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls, r.serving = append(r.calls, call), serving
	return nil
}
func (r *recorder) Deploy(context.Context, bool) error      { return r.record("deploy", true) }
func (r *recorder) Replicate(context.Context, string) error { return r.record("replicate", true) }
func (r *recorder) Promote(context.Context) error           { return r.record("promote", true) }
func (r *recorder) Demote(context.Context, string) error    { return r.record("demote", true) }
func (r *recorder) Fence(context.Context) error             { return r.record("fence", false) }
func (r *recorder) Health(context.Context) error            { return nil }
func (r *recorder) Exited() <-chan struct{}                 { return r.exited }
func (r *recorder) state() (calls []string, serving bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.calls...), r.serving
}

// The member holds its primary's lease itself: when the role's
// LeaseExpiresAt passes by the member's clock without the agent writing a
// later one (the agent is SIGSTOPped, killed or cut off), it fences the
// software at once, without waiting for its agent or the server; a
// renewal makes it primary again. On a fake clock, without sleeping for
// time to pass.
func TestPrimaryFencesItselfWhenItsLeaseRunsOut(t *testing.T) {
	dir := t.TempDir()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	tell := func(expiry time.Time) {
		t.Helper()
		as := api.FailoverAssignment{Group: "pg", Role: api.RolePrimary, Epoch: 1, LeaseSeconds: 8, LeaseExpiresAt: &expiry}
		if err := atomicfile.WriteJSON(filepath.Join(dir, member.RoleFile), as); err != nil {
			t.Fatal(err)
		}
	}
	status := func() api.MemberStatus {
		var st api.MemberStatus
		_, _ = atomicfile.ReadJSON(filepath.Join(dir, member.StatusFile), &st)
		return st
	}
	tell(clk.Now().Add(6 * time.Second))
	cfg := member.DefaultConfig(dir)
	cfg.PollInterval, cfg.Log, cfg.Clock = time.Second, slog.New(slog.DiscardHandler), clk
	capability := &recorder{exited: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- member.Run(ctx, capability, cfg) }()
	t.Cleanup(func() { cancel(); <-done })

	// tick steps the clock once the member waits on it, and waits for the
	// status it writes after that poll.
	tick := func(d time.Duration, want func(api.MemberStatus) bool) api.MemberStatus {
		t.Helper()
		eventually(t, "the member waiting on its clock", clk.HasWaiters)
		clk.Step(d)
		var st api.MemberStatus
		eventually(t, "the member's next report", func() bool { st = status(); return want(st) })
		return st
	}
	eventually(t, "primary", func() bool { st := status(); return st.Role == api.RolePrimary && st.Serving })
	for i := 0; i < 5; i++ { // 5 s: the lease (6 s) still holds
		tick(time.Second, func(st api.MemberStatus) bool { return st.Role == api.RolePrimary })
	}
	if calls, serving := capability.state(); !serving || len(calls) != 1 {
		t.Fatalf("before the expiry: calls %v, serving %v", calls, serving)
	}
	st := tick(time.Second, func(st api.MemberStatus) bool { return st.Role == api.RoleFenced })
	if calls, serving := capability.state(); serving || calls[len(calls)-1] != "fence" {
		t.Fatalf("at the expiry: calls %v, serving %v; want fenced", calls, serving)
	}
	if st.Serving || st.Message == "" {
		t.Fatalf("status at the expiry %+v: want not serving, saying why", st)
	}
	// The agent renews (its heartbeat was answered): primary again.
	tell(clk.Now().Add(6 * time.Second))
	tick(time.Second, func(st api.MemberStatus) bool { return st.Role == api.RolePrimary && st.Serving })
}
