package sqlite

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/store"
	"github.com/gantry-dev/gantry/store/sqlstore"
	"github.com/gantry-dev/gantry/store/storetest"
)

func openTemp(t *testing.T) store.Store { return openTempTB(t) }

func openTempTB(t testing.TB) store.Store {
	t.Helper()
	s, err := Open(context.Background(), DefaultConfig(filepath.Join(t.TempDir(), "gantry.db")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestContract(t *testing.T) {
	storetest.Run(t, openTemp)
}

func TestFeedContract(t *testing.T) {
	storetest.RunFeed(t, func(t *testing.T, retention time.Duration) store.Store {
		cfg := DefaultConfig(filepath.Join(t.TempDir(), "gantry.db"))
		cfg.ChangeRetention = retention
		s, err := Open(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func TestReopenKeepsDataAndSchema(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "g.db")
	s, err := Open(ctx, DefaultConfig(path))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Update(ctx, func(tx store.Tx) error { return tx.PutMeta("a", "1") }); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(ctx, DefaultConfig(path))
	if err != nil {
		t.Fatalf("reopen (migrations must be idempotent): %v", err)
	}
	defer s.Close()
	if err := s.View(ctx, func(tx store.Tx) error {
		v, err := tx.GetMeta("a")
		if v != "1" {
			return fmt.Errorf("meta after reopen: %q %v", v, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// crashWriterEnv makes the test binary act as a writer that prints "ack N"
// after each committed transaction, until it is killed.
const crashWriterEnv = "GANTRY_SQLITE_CRASH_WRITER"

func TestMain(m *testing.M) {
	if path := os.Getenv(crashWriterEnv); path != "" {
		runCrashWriter(path)
		return
	}
	os.Exit(m.Run())
}

func runCrashWriter(path string) {
	ctx := context.Background()
	s, err := Open(ctx, DefaultConfig(path))
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(1)
	}
	for i := 0; ; i++ {
		name := "svc-" + strconv.Itoa(i)
		err := s.Update(ctx, func(tx store.Tx) error {
			return tx.PutService(&api.Service{Kind: api.KindService, Metadata: api.ObjectMeta{Name: name}, Spec: api.ServiceSpec{Cluster: "c", Image: strings.Repeat("x", 200)}})
		})
		if err != nil {
			fmt.Println("write:", err)
			os.Exit(1)
		}
		fmt.Printf("ack %d\n", i)
	}
}

// Kill -9 a writer at random points: every write it acknowledged is there
// after reopening.
func TestKilledWriterLosesNoAcknowledgedWrite(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	for round := 0; round < 5; round++ {
		path := filepath.Join(t.TempDir(), "crash.db")
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashWriterEnv+"="+path)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		killAfter := 5 + rng.IntN(200)
		acked := -1
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			n, err := strconv.Atoi(strings.TrimPrefix(line, "ack "))
			if err != nil {
				t.Fatalf("writer: %s", line)
			}
			acked = n
			if n == killAfter {
				_ = cmd.Process.Signal(syscall.SIGKILL)
				break
			}
		}
		_ = cmd.Wait()
		s, err := Open(context.Background(), DefaultConfig(path))
		if err != nil {
			t.Fatal(err)
		}
		err = s.View(context.Background(), func(tx store.Tx) error {
			list, err := tx.ListServices()
			if err != nil {
				return err
			}
			got := map[string]bool{}
			for _, svc := range list {
				got[svc.Metadata.Name] = true
			}
			for i := 0; i <= acked; i++ {
				if !got["svc-"+strconv.Itoa(i)] {
					return fmt.Errorf("round %d: acknowledged write svc-%d lost (acked up to %d)", round, i, acked)
				}
			}
			return nil
		})
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
}

// A write whose context ends before it commits fails with the context's
// error, not as a store that is unavailable, and leaves nothing: database/
// sql rolls the transaction back when its context ends, and the commit
// then reports only that the transaction was done.
func TestWriteWhoseContextEndedFailsWithTheContextsError(t *testing.T) {
	s := openTemp(t)
	ctx, cancel := context.WithCancel(context.Background())
	err := s.Update(ctx, func(tx store.Tx) error {
		if err := tx.PutCluster(&api.Cluster{Metadata: api.ObjectMeta{Name: "c"}}); err != nil {
			return err
		}
		cancel()
		sqlTx, _ := sqlstore.SQL(tx)
		for !errors.Is(sqlTx.QueryRowContext(context.Background(), "SELECT 1").Scan(new(int)), sql.ErrTxDone) {
			runtime.Gosched() // until database/sql has rolled it back
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) || errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("write after its context ended: %v, want the context's cancellation", err)
	}
	err = s.View(context.Background(), func(tx store.Tx) error {
		_, err := tx.GetCluster("c")
		return err
	})
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the cancelled write left its cluster: %v", err)
	}
}
