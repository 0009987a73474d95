// Package member runs one side of a failover group on its machine: it
// reads the role its agent keeps current, has the software take that
// role through a Capability, and reports whether it serves in it. The
// loop is written once; a capability (PostgreSQL, generic hooks) says
// how a given software is deployed, replicated, promoted, demoted and
// fenced.
package member

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/internal/atomicfile"
	"k8s.io/utils/clock"
)

// Capability is what a software must offer to fail over.
type Capability interface {
	// Deploy serves as primary; bootstrap allows initialising empty data.
	Deploy(ctx context.Context, bootstrap bool) error
	// Replicate serves as a replica of primary (host:port), seeding from
	// it when there is no data, and following a primary that moved.
	Replicate(ctx context.Context, primary string) error
	// Promote makes the running replica the primary.
	Promote(ctx context.Context) error
	// Demote makes a former primary a replica of primary, rewinding its
	// data (or seeding it afresh).
	Demote(ctx context.Context, primary string) error
	// Fence stops serving, cleanly where it can.
	Fence(ctx context.Context) error
	// Health says whether the software serves in the role it was given.
	Health(ctx context.Context) error
	// Exited is closed when the software stops by itself.
	Exited() <-chan struct{}
}

// Reporter is a capability that reports its replication (positions, the
// standby a primary waits for) and keeps it in step with what the server
// recorded of it (role.SyncStandby).
type Reporter interface {
	Replication(ctx context.Context, role api.FailoverAssignment) (*api.ReplicationStatus, error)
}

// ErrNotYet is what a capability returns (wrapped) when a transition
// cannot start yet and it changed nothing (the primary is not reachable
// yet): the member keeps doing what it does and tries again.
var ErrNotYet = errors.New("not yet")

// The member's directory and environment, shared with its agent: the
// agent writes RoleFile and starts the member with DirEnv set; the member
// writes StatusFile, which the agent reports.
const (
	RoleFile   = "role.json"
	StatusFile = "status.json"
	DirEnv     = "GANTRY_FAILOVER_DIR"
)

// Environment is the role as environment variables: a member's at its
// start, and the generic capability's command and hooks'.
func Environment(role string, epoch int64, primary string) map[string]string {
	return map[string]string{"GANTRY_FAILOVER_ROLE": role, "GANTRY_FAILOVER_EPOCH": strconv.FormatInt(epoch, 10), "GANTRY_FAILOVER_PRIMARY": primary}
}

// ReadStatus reads what the member last reported (nil when nothing yet).
func ReadStatus(dir string) (*api.MemberStatus, error) {
	return readFile[api.MemberStatus](dir, StatusFile)
}

// readFile reads one of the member's JSON files (nil when it is absent).
func readFile[T any](dir, name string) (*T, error) {
	var v T
	found, err := atomicfile.ReadJSON(filepath.Join(dir, name), &v)
	if err != nil || !found {
		return nil, err
	}
	return &v, nil
}

// Config tunes the loop.
type Config struct {
	// Dir holds the role, the status and the software's data.
	Dir string
	// PollInterval is how often the role is read and health checked.
	PollInterval time.Duration
	// StepTimeout bounds one transition (a seed can take long).
	StepTimeout time.Duration
	Log         *slog.Logger
	// Clock is the machine's time: a primary whose lease (the role's
	// LeaseExpiresAt) has passed by it stops serving.
	Clock clock.WithTicker
}

// DefaultConfig returns the defaults.
func DefaultConfig(dir string) Config {
	return Config{Dir: dir, PollInterval: 200 * time.Millisecond, StepTimeout: 10 * time.Minute, Log: slog.Default(), Clock: clock.RealClock{}}
}

// leaseOver turns the role of a primary whose lease ran out by the
// member's own clock into fenced: its agent renews the lease with every
// heartbeat the server answers, and an agent that is stopped (SIGSTOP),
// killed or cut off renews nothing, so the member stops by itself, as
// Patroni's watchdog does.
func leaseOver(as *api.FailoverAssignment, now time.Time) (*api.FailoverAssignment, string) {
	if as == nil || as.Role != api.RolePrimary || as.LeaseExpiresAt == nil || now.Before(*as.LeaseExpiresAt) {
		return as, ""
	}
	fenced := *as
	fenced.Role = api.RoleFenced
	return &fenced, "lease expired at " + as.LeaseExpiresAt.UTC().Format(time.RFC3339Nano) + " without renewal: stopped serving"
}

// ReadRole reads the role the agent wrote.
func ReadRole(dir string) (*api.FailoverAssignment, error) {
	return readFile[api.FailoverAssignment](dir, RoleFile)
}

// applied is what the software was last made to do.
type applied struct {
	role    string
	epoch   int64
	primary string
	// wasPrimary: its data last served as primary (a replica needs a
	// rewind before following another).
	wasPrimary bool
}

// Run keeps the software in its role until ctx ends (then fences it) or
// the software exits by itself (an error: the agent restarts the member).
func Run[C Capability](ctx context.Context, c C, cfg Config) error {
	log := cfg.Log
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	var cur applied
	ticker := cfg.Clock.NewTicker(cfg.PollInterval)
	defer ticker.Stop()
	for {
		as, err := ReadRole(cfg.Dir)
		if err != nil {
			log.Warn("read role", "err", err)
		}
		as, expired := leaseOver(as, cfg.Clock.Now())
		if expired != "" && cur.role == api.RolePrimary {
			log.Warn("failover primary: "+expired, "epoch", as.Epoch)
		}
		status := api.MemberStatus{Role: cur.role, Epoch: cur.epoch}
		if as != nil {
			next, err := step(ctx, c, cur, *as, cfg.StepTimeout, log)
			cur = next
			status = api.MemberStatus{Role: cur.role, Epoch: cur.epoch, Message: expired}
			if err != nil {
				status.Message = err.Error()
				log.Warn("role not taken yet", "role", as.Role, "epoch", as.Epoch, "err", err)
			}
		}
		if cur.role == api.RolePrimary || cur.role == api.RoleReplica {
			if err := c.Health(ctx); err != nil {
				status.Message = "not serving: " + err.Error()
			} else {
				status.Serving = true
				status.Replication, status.Message = report(ctx, c, as, status.Message)
			}
		}
		if err := atomicfile.WriteJSON(filepath.Join(cfg.Dir, StatusFile), status); err != nil {
			log.Warn("write status", "err", err)
		}
		var exited <-chan struct{} // only a serving role watches the software
		if cur.role == api.RolePrimary || cur.role == api.RoleReplica {
			exited = c.Exited()
		}
		select {
		case <-ctx.Done():
			stop, cancel := context.WithTimeout(context.Background(), cfg.StepTimeout)
			defer cancel()
			err := c.Fence(stop)
			_ = atomicfile.WriteJSON(filepath.Join(cfg.Dir, StatusFile), api.MemberStatus{Role: api.RoleFenced, Epoch: cur.epoch})
			return err
		case <-exited:
			return errors.New("the software stopped by itself")
		case <-ticker.C():
		}
	}
}

// report asks a Reporter for its replication (nothing of others).
func report[C Capability](ctx context.Context, c C, as *api.FailoverAssignment, message string) (*api.ReplicationStatus, string) {
	r, ok := any(c).(Reporter)
	if !ok || as == nil {
		return nil, message
	}
	st, err := r.Replication(ctx, *as)
	if err != nil {
		return nil, "replication: " + err.Error()
	}
	return st, message
}

// step moves the software toward the role it is told.
func step[C Capability](ctx context.Context, c C, cur applied, as api.FailoverAssignment, timeout time.Duration, log *slog.Logger) (applied, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	next := applied{role: as.Role, epoch: as.Epoch, primary: as.Primary, wasPrimary: cur.wasPrimary}
	var err error
	switch as.Role {
	case api.RoleFenced:
		if cur.role == api.RoleFenced && cur.epoch == as.Epoch {
			return cur, nil
		}
		log.Info("fencing: stop serving", "epoch", as.Epoch)
		err = c.Fence(ctx)
	case api.RolePrimary:
		switch {
		case cur.role == api.RolePrimary && cur.epoch == as.Epoch:
			return cur, nil
		case cur.role == api.RoleReplica:
			log.Info("promoting to primary", "epoch", as.Epoch)
			err = c.Promote(ctx)
		default:
			log.Info("serving as primary", "epoch", as.Epoch, "bootstrap", as.Bootstrap)
			err = c.Deploy(ctx, as.Bootstrap)
		}
		next.wasPrimary = err == nil
	case api.RoleReplica:
		if as.Primary == "" {
			// The primary is gone (being replaced): a replica keeps its
			// data and waits; it is what a failover promotes.
			if cur.role == api.RoleReplica {
				cur.epoch = as.Epoch
				return cur, nil
			}
			return cur, fmt.Errorf("waiting for the primary's address: %w", ErrNotYet)
		}
		switch {
		case cur.role == api.RoleReplica && cur.epoch == as.Epoch && cur.primary == as.Primary:
			return cur, nil
		case cur.wasPrimary || cur.role == api.RolePrimary:
			log.Info("demoting to replica", "epoch", as.Epoch, "primary", as.Primary)
			err = c.Demote(ctx, as.Primary)
		default:
			log.Info("serving as replica", "epoch", as.Epoch, "primary", as.Primary)
			err = c.Replicate(ctx, as.Primary)
		}
		if err == nil {
			next.wasPrimary = false
		}
	default:
		return cur, fmt.Errorf("unknown role %q", as.Role)
	}
	if errors.Is(err, ErrNotYet) {
		return cur, err // nothing changed: try again on the next poll
	}
	if err != nil {
		// Not in the role: retried on the next poll; serving nothing meanwhile
		// is the safe side.
		_ = c.Fence(context.WithoutCancel(ctx))
		return applied{role: api.RoleFenced, epoch: cur.epoch, wasPrimary: next.wasPrimary || cur.wasPrimary}, err
	}
	return next, nil
}

// Dir is the member's directory from its environment.
func Dir() (string, error) {
	dir := os.Getenv(DirEnv)
	if dir == "" {
		return "", errors.New(DirEnv + " is not set: `gantry member` runs as a failover group's replica, started by its agent")
	}
	return dir, os.MkdirAll(dir, 0o700)
}
