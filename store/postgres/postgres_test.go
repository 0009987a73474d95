package postgres

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/store"
	"github.com/gantry-dev/gantry/store/postgres/pgtest"
	"github.com/gantry-dev/gantry/store/storetest"
)

func openTest(t *testing.T) *Store {
	t.Helper()
	s, err := Open(context.Background(), DefaultConfig(pgtest.URL(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return openTest(t) })
}

func TestFeedContract(t *testing.T) {
	storetest.RunFeed(t, func(t *testing.T, retention time.Duration) store.Store {
		cfg := DefaultConfig(pgtest.URL(t))
		cfg.ChangeRetention = retention
		s, err := Open(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// Servers starting together migrate once: the others wait for the lock
// and find the schema current.
func TestConcurrentOpenMigratesOnce(t *testing.T) {
	url := pgtest.URL(t)
	errs := make(chan error, 3)
	for range 3 {
		go func() {
			s, err := Open(context.Background(), DefaultConfig(url))
			if err == nil {
				s.Close()
			}
			errs <- err
		}()
	}
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

func TestLeaseTerms(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	a, err := s.AcquireLease(ctx, "leader", "a", time.Minute)
	if err != nil || a.Epoch != 1 {
		t.Fatalf("first acquire: %+v %v", a, err)
	}
	if _, err := s.AcquireLease(ctx, "leader", "b", time.Minute); !errors.Is(err, store.ErrLeaseHeld) {
		t.Fatalf("b while a holds it: %v, want ErrLeaseHeld", err)
	}
	renewed, err := s.AcquireLease(ctx, "leader", "a", time.Minute)
	if err != nil || renewed.Epoch != a.Epoch {
		t.Fatalf("renewal must keep the epoch: %+v %v", renewed, err)
	}
	if err := s.Update(ctx, func(tx store.Tx) error { return tx.(store.LeaseTx).CheckLease(a) }); err != nil {
		t.Fatalf("holder's check: %v", err)
	}
	if err := s.ReleaseLease(ctx, a); err != nil {
		t.Fatal(err)
	}
	b, err := s.AcquireLease(ctx, "leader", "b", time.Minute)
	if err != nil || b.Epoch != 2 {
		t.Fatalf("b after release: %+v %v", b, err)
	}
	err = s.Update(ctx, func(tx store.Tx) error {
		if err := tx.(store.LeaseTx).CheckLease(a); err != nil {
			return err
		}
		return tx.PutMeta("written-by", "a")
	})
	if !errors.Is(err, store.ErrFenced) {
		t.Fatalf("a's write after b took over: %v, want ErrFenced", err)
	}
	assertNoMeta(t, s, "written-by")
}

// A lease that runs out ends the term: the holder's writes are fenced
// even though nobody took over, and its next acquire is a new term.
func TestExpiredLeaseFences(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	a, err := s.AcquireLease(ctx, "leader", "a", 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	// The database's clock must pass the expiry: check until it has.
	deadline := time.Now().Add(10 * time.Second)
	for {
		err = s.Update(ctx, func(tx store.Tx) error { return tx.(store.LeaseTx).CheckLease(a) })
		if errors.Is(err, store.ErrFenced) {
			break
		}
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("check of an expired term: %v, want ErrFenced", err)
		}
	}
	again, err := s.AcquireLease(ctx, "leader", "a", time.Minute)
	if err != nil || again.Epoch != a.Epoch+1 {
		t.Fatalf("acquire after expiry must start a new term: %+v %v", again, err)
	}
}

// A new term waits for a transaction of the old one that checked the
// lease: the old term's write commits before the new term begins, never
// after.
func TestNewTermWaitsForCheckedWrite(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	a, err := s.AcquireLease(ctx, "leader", "a", 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	release, done := openCheckedWrite(t, s, a)
	acquired := make(chan store.Lease, 1)
	go func() {
		for {
			if l, err := s.AcquireLease(ctx, "leader", "b", time.Minute); err == nil {
				acquired <- l
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	time.Sleep(500 * time.Millisecond) // past a's expiry: b is blocked by a's transaction
	select {
	case l := <-acquired:
		t.Fatalf("b began term %d while a's checked transaction was open", l.Epoch)
	default:
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("a's checked write: %v", err)
	}
	if l := <-acquired; l.Epoch != a.Epoch+1 {
		t.Fatalf("b's term: %+v", l)
	}
}

// The holder renews its term while a write of the term that checked the
// lease is still open, and so does it while another server asks for the
// lease: a pass that writes for seconds must not cost the leader its
// lease (it did: the fence's lock made the renewal wait for the write,
// the leader stepped down, and its pass was lost, over and over).
func TestRenewalDoesNotWaitForTheTermsWrites(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	a, err := s.AcquireLease(ctx, "leader", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	release, done := openCheckedWrite(t, s, a)
	for round := range 3 {
		if _, err := s.AcquireLease(ctx, "leader", "b", time.Minute); !errors.Is(err, store.ErrLeaseHeld) {
			t.Fatalf("round %d: b asks: %v, want ErrLeaseHeld", round, err)
		}
		renewCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		renewed, err := s.AcquireLease(renewCtx, "leader", "a", time.Minute)
		cancel()
		if err != nil || renewed.Epoch != a.Epoch {
			t.Fatalf("round %d: a's renewal with its write open: %+v %v, want epoch %d at once", round, renewed, err, a.Epoch)
		}
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("a's checked write: %v", err)
	}
}

// openCheckedWrite opens a write of the term that checked its lease and
// returns once it has; the write commits after release is closed, its
// outcome on done.
func openCheckedWrite(t *testing.T, s *Store, term store.Lease) (release chan struct{}, done chan error) {
	t.Helper()
	checked := make(chan struct{})
	release, done = make(chan struct{}), make(chan error, 1)
	go func() {
		done <- s.Update(context.Background(), func(tx store.Tx) error {
			if err := tx.(store.LeaseTx).CheckLease(term); err != nil {
				return err
			}
			select {
			case <-checked:
			default:
				close(checked)
			}
			<-release
			return tx.PutMeta("term", term.Holder)
		})
	}()
	<-checked
	return release, done
}

func assertNoMeta(t *testing.T, s store.Store, key string) {
	t.Helper()
	err := s.View(context.Background(), func(tx store.Tx) error {
		_, err := tx.GetMeta(key)
		return err
	})
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("meta %s: %v, want not found", key, err)
	}
}

// The holder renews its lease while every connection of the store's pool
// is held by other transactions: the lease has a pool of its own. (At
// 10,000 machines, heartbeats queued on the change feed's lock held every
// pooled connection, and the leader's renewals timed out.)
func TestRenewalDoesNotWaitForAPooledConnection(t *testing.T) {
	ctx := context.Background()
	const pooled = 2
	s := openWith(t, func(c *Config) { c.MaxConns = pooled })
	a, err := s.AcquireLease(ctx, "leader", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	holding, release := make(chan struct{}, pooled), make(chan struct{})
	done := make(chan error, pooled)
	for range pooled {
		go func() {
			done <- s.View(ctx, func(store.Tx) error {
				holding <- struct{}{}
				<-release
				return nil
			})
		}()
	}
	for range pooled {
		<-holding
	}
	renewCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	renewed, err := s.AcquireLease(renewCtx, "leader", "a", time.Minute)
	cancel()
	close(release)
	if err != nil || renewed.Epoch != a.Epoch {
		t.Fatalf("renewal with every pooled connection busy: %+v %v, want epoch %d", renewed, err, a.Epoch)
	}
	for range pooled {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// A server of the version before heartbeats were marked writes them
// without a mark, as it did: the database marks them all the same, so
// that a newer leader's view, which reads only what was marked since its
// last sync, sees the machines that report to the older server.
func TestHeartbeatsAnOlderServerWritesAreMarked(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	at := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	if err := s.Update(ctx, func(tx store.Tx) error { return tx.PutLiveness(map[string]time.Time{"m1": at}) }); err != nil {
		t.Fatal(err)
	}
	scan := func(after int64) (map[string]time.Time, int64) {
		got, newest := map[string]time.Time{}, after
		err := s.View(ctx, func(tx store.Tx) error {
			return tx.ScanLiveness(after, func(id string, at time.Time, mark int64) { got[id], newest = at, max(newest, mark) })
		})
		if err != nil {
			t.Fatal(err)
		}
		return got, newest
	}
	_, seen := scan(store.AllLiveness)
	const olderWrite = `INSERT INTO liveness(machine_id, at) VALUES ($1, $2)
		ON CONFLICT(machine_id) DO UPDATE SET at = excluded.at WHERE excluded.at > liveness.at`
	for id, beat := range map[string]time.Time{"m1": at.Add(time.Second), "m2": at} {
		if _, err := s.db.ExecContext(ctx, olderWrite, id, beat.UnixNano()); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := scan(seen); !maps.Equal(got, map[string]time.Time{"m1": at.Add(time.Second), "m2": at}) {
		t.Fatalf("read after mark %d: %v, want m1's newer heartbeat and m2's first", seen, got)
	}
}
