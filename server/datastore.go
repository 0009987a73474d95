package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gantry-dev/gantry/store"
	"github.com/gantry-dev/gantry/store/postgres"
	"github.com/gantry-dev/gantry/store/sqlite"
)

// StoreConfig says where the state is: the SQLite file in the data dir
// (one server), or a PostgreSQL database several servers share.
type StoreConfig struct {
	// URL is postgres://… for PostgreSQL; empty for SQLite.
	URL      string
	SQLite   sqlite.Config
	Postgres postgres.Config
}

// openStore opens the configured store; leases is non-nil when several
// servers may share it.
// The change feed's times are the server's clock.
func openStore(ctx context.Context, cfg StoreConfig, now func() time.Time) (store.Store, store.Leases, error) {
	switch {
	case cfg.URL == "":
		sc := cfg.SQLite
		sc.Now = now
		db, err := sqlite.Open(ctx, sc)
		return db, nil, err
	case strings.HasPrefix(cfg.URL, "postgres://") || strings.HasPrefix(cfg.URL, "postgresql://"):
		pc := cfg.Postgres
		pc.URL, pc.Now = cfg.URL, now
		db, err := postgres.Open(ctx, pc)
		if err != nil {
			return nil, nil, fmt.Errorf("--store: %w", err)
		}
		return db, db, nil
	}
	return nil, nil, fmt.Errorf("--store: want a postgres:// URL (or nothing, for SQLite in the data dir)")
}

// dataDirLock is an exclusive lock on the data dir, held while the server
// runs: a second server on the same dir would run a second control loop
// on the same SQLite file and overwrite the first one's files.
type dataDirLock struct{ f *os.File }

func lockDataDir(dir string) (*dataDirLock, error) {
	path := filepath.Join(dir, "server.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("data dir lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		owner, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("data dir %s is in use by another gantry server (pid %s): stop it, or give this one its own --data-dir",
				dir, strings.TrimSpace(string(owner)))
		}
		return nil, fmt.Errorf("data dir lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &dataDirLock{f: f}, nil
}

func (l *dataDirLock) release() {
	if l != nil && l.f != nil {
		_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
		l.f.Close()
	}
}
