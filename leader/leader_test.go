package leader

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/store"
	"github.com/gantry-dev/gantry/store/postgres"
	"github.com/gantry-dev/gantry/store/postgres/pgtest"
	"k8s.io/utils/clock"
)

// fast is short, yet long enough for a loaded CI host's PostgreSQL (a
// renewal slower than RenewDeadline makes a leader step down).
var fast = Config{LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 100 * time.Millisecond}

// firstTermWait bounds the wait for a lone server's first term.
const firstTermWait = 30 * time.Second

// cut is a store whose lease calls can be made to hang, as when the
// database stops answering this server.
type cut struct {
	*postgres.Store
	off atomic.Bool
}

func (c *cut) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (store.Lease, error) {
	if c.off.Load() {
		<-ctx.Done()
		return store.Lease{}, ctx.Err()
	}
	return c.Store.AcquireLease(ctx, name, holder, ttl)
}

func openShared(t *testing.T) (*cut, *cut) {
	url := pgtest.URL(t)
	open := func() *cut {
		s, err := postgres.Open(context.Background(), postgres.DefaultConfig(url))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return &cut{Store: s}
	}
	return open(), open()
}

type server struct {
	e      *Elector
	terms  chan store.Lease
	cancel context.CancelFunc
	done   chan struct{}
}

func start(t *testing.T, s *cut, name string) *server {
	ctx, cancel := context.WithCancel(context.Background())
	srv := &server{e: New(fast, s, name, clock.RealClock{}, slog.New(slog.DiscardHandler)), terms: make(chan store.Lease, 10), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(srv.done)
		srv.e.Run(ctx, func(ctx context.Context, term store.Lease) {
			srv.terms <- term
			<-ctx.Done()
		})
	}()
	t.Cleanup(func() { cancel(); <-srv.done })
	return srv
}

func awaitTerm(t *testing.T, s *server, within time.Duration) store.Lease {
	t.Helper()
	select {
	case l := <-s.terms:
		return l
	case <-time.After(within):
		t.Fatalf("%s did not begin a term within %s", s.e.Holder(), within)
		return store.Lease{}
	}
}

func TestOneLeaderAndHandOverOnShutdown(t *testing.T) {
	sa, sb := openShared(t)
	a := start(t, sa, "a")
	first := awaitTerm(t, a, firstTermWait)
	b := start(t, sb, "b")
	<-b.e.Following() // b has tried and found a leading
	if b.e.Leading() {
		t.Fatal("b leads while a holds the lease")
	}
	a.cancel()
	<-a.done
	if a.e.Leading() {
		t.Fatal("a still leads after shutdown")
	}
	// a gave the lease up: b takes it within a retry, not a lease.
	second := awaitTerm(t, b, fast.LeaseDuration)
	if second.Epoch != first.Epoch+1 {
		t.Fatalf("b's epoch %d after a's %d", second.Epoch, first.Epoch)
	}
}

// A leader cut off from the database stops leading at its renew
// deadline, before its lease can pass to another server; its writes are
// fenced from then on, and the other server leads once the lease ran out.
func TestCutOffLeaderStepsDownBeforeTheLeaseEnds(t *testing.T) {
	sa, sb := openShared(t)
	a := start(t, sa, "a")
	term := awaitTerm(t, a, firstTermWait)
	fencedA := Fence(sa, a.e)
	b := start(t, sb, "b")

	sa.off.Store(true)
	cutAt := time.Now()
	var steppedDown time.Duration
	for a.e.Leading() {
		time.Sleep(5 * time.Millisecond)
	}
	steppedDown = time.Since(cutAt)
	if steppedDown >= fast.LeaseDuration {
		t.Fatalf("a stepped down %s after the cut, not before its lease (%s) ran out", steppedDown, fast.LeaseDuration)
	}
	next := awaitTerm(t, b, 3*fast.LeaseDuration)
	if next.Epoch <= term.Epoch {
		t.Fatalf("b's term %d is not after a's %d", next.Epoch, term.Epoch)
	}
	err := fencedA.Update(context.Background(), func(tx store.Tx) error { return tx.PutMeta("by", "a") })
	if !errors.Is(err, store.ErrFenced) {
		t.Fatalf("a's write after it stepped down: %v, want ErrFenced", err)
	}
	// Even a write that skips the elector's own view is refused by the
	// database: a's old term is no longer current.
	err = sa.Update(context.Background(), func(tx store.Tx) error {
		if err := tx.(store.LeaseTx).CheckLease(term); err != nil {
			return err
		}
		return tx.PutMeta("by", "a")
	})
	if !errors.Is(err, store.ErrFenced) {
		t.Fatalf("a's old-term write checked in the database: %v, want ErrFenced", err)
	}
	if err := Fence(sb, b.e).Update(context.Background(), func(tx store.Tx) error { return tx.PutMeta("by", "b") }); err != nil {
		t.Fatalf("the new leader's write: %v", err)
	}
	// Back in touch, a follows: b keeps the lease.
	sa.off.Store(false)
	<-a.e.Following() // a has tried again and found b leading
	if a.e.Leading() || !b.e.Leading() {
		t.Fatalf("after a is back: a leads %v, b leads %v", a.e.Leading(), b.e.Leading())
	}
}

func TestSoloLeadsForGood(t *testing.T) {
	e := New(fast, nil, "only", clock.RealClock{}, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	led := make(chan bool, 1)
	go e.Run(ctx, func(ctx context.Context, term store.Lease) { led <- e.Leading(); cancel() })
	if !<-led {
		t.Fatal("a server without leases must lead")
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	bad := DefaultConfig()
	bad.RenewDeadline = bad.LeaseDuration
	if err := bad.Validate(); err == nil {
		t.Fatal("a renew deadline as long as the lease leaves no margin")
	}
}
