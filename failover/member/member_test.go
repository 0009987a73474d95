package member_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/failover/generic"
	"github.com/gantry-dev/gantry/failover/member"
	"github.com/gantry-dev/gantry/internal/atomicfile"
)

// The member loop with the generic capability, on real processes: it
// starts the command in its role, runs the hooks on each transition with
// the role in their environment, reports what it does, and stops the
// command when fenced.
func TestGenericMemberFollowsItsRole(t *testing.T) {
	dir := t.TempDir()
	work := t.TempDir()
	log := filepath.Join(work, "hooks")
	hook := func(name string) []string {
		return []string{"sh", "-c", "echo " + name + " $GANTRY_FAILOVER_ROLE $GANTRY_FAILOVER_EPOCH $GANTRY_FAILOVER_PRIMARY >> " + log}
	}
	capability := api.GenericCapability{Promote: hook("promote"), Demote: hook("demote"), Health: []string{"test", "-f", filepath.Join(work, "alive")}}
	command := []string{"sh", "-c", "echo $$ > " + filepath.Join(work, "pid") + "; echo $GANTRY_FAILOVER_ROLE > " + filepath.Join(work, "started") +
		"; touch " + filepath.Join(work, "alive") + "; exec sleep 300"}
	tell := func(role string, epoch int64, primary string) {
		t.Helper()
		as := api.FailoverAssignment{Group: "kv", Role: role, Epoch: epoch, Primary: primary, LeaseSeconds: 4,
			Capability: api.FailoverCapability{Name: api.CapabilityGeneric, Generic: &capability}}
		if err := atomicfile.WriteJSON(filepath.Join(dir, member.RoleFile), as); err != nil {
			t.Fatal(err)
		}
	}
	reports := func(role string, epoch int64, serving bool) {
		t.Helper()
		eventually(t, role+" reported", func() bool {
			var st api.MemberStatus
			found, _ := atomicfile.ReadJSON(filepath.Join(dir, member.StatusFile), &st)
			return found && st.Role == role && st.Epoch == epoch && st.Serving == serving
		})
	}

	tell(api.RolePrimary, 1, "")
	cfg := member.DefaultConfig(dir)
	cfg.PollInterval, cfg.Log = 20*time.Millisecond, slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- member.Run(ctx, generic.New(generic.Config{GenericCapability: capability, Command: command, Dir: dir, StopTimeout: time.Second}), cfg)
	}()
	reports(api.RolePrimary, 1, true)
	if started := strings.TrimSpace(readFile(filepath.Join(work, "started"))); started != api.RolePrimary {
		t.Fatalf("the command started as %q", started)
	}

	tell(api.RoleReplica, 2, "10.0.0.9:5432")
	reports(api.RoleReplica, 2, true)
	tell(api.RolePrimary, 3, "")
	reports(api.RolePrimary, 3, true)
	if got := readFile(log); got != "demote replica 2 10.0.0.9:5432\npromote primary 3\n" {
		t.Fatalf("hooks ran: %q", got)
	}

	os.Remove(filepath.Join(work, "alive"))
	reports(api.RolePrimary, 3, false) // the health hook fails: not serving

	tell(api.RoleFenced, 3, "")
	reports(api.RoleFenced, 3, false)
	pid := strings.TrimSpace(readFile(filepath.Join(work, "pid")))
	eventually(t, "the fenced command stopped", func() bool {
		_, err := os.Stat("/proc/" + pid)
		return os.IsNotExist(err)
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

func readFile(path string) string {
	data, _ := os.ReadFile(path)
	return string(data)
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("gave up waiting for %s", what)
}

// fakeCapability records calls; Replicate fails as told.
type fakeCapability struct {
	replicateErr error
	fences       int
	done         chan struct{}
}

func (f *fakeCapability) Deploy(context.Context, bool) error      { return nil }
func (f *fakeCapability) Replicate(context.Context, string) error { return f.replicateErr }
func (f *fakeCapability) Promote(context.Context) error           { return nil }
func (f *fakeCapability) Demote(context.Context, string) error    { return nil }
func (f *fakeCapability) Fence(context.Context) error             { f.fences++; return nil }
func (f *fakeCapability) Health(context.Context) error            { return nil }
func (f *fakeCapability) Exited() <-chan struct{}                 { return f.done }

// A transition that cannot start yet changes nothing; one that fails
// leaves the software fenced, the safe side.
func TestFailedTransitionFencesOnlyWhenSomethingChanged(t *testing.T) {
	for _, c := range []struct {
		name   string
		err    error
		fences int
	}{{"not yet", fmt.Errorf("primary unreachable: %w", member.ErrNotYet), 0}, {"failed", errors.New("pg_basebackup failed"), 1}} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			as := api.FailoverAssignment{Group: "kv", Role: api.RoleReplica, Epoch: 1, Primary: "10.0.0.1:5432"}
			if err := atomicfile.WriteJSON(filepath.Join(dir, member.RoleFile), as); err != nil {
				t.Fatal(err)
			}
			f := &fakeCapability{replicateErr: c.err, done: make(chan struct{})}
			cfg := member.DefaultConfig(dir)
			cfg.PollInterval, cfg.Log = time.Hour, slog.New(slog.NewTextHandler(io.Discard, nil))
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- member.Run(ctx, f, cfg) }()
			eventually(t, "the failure reported", func() bool {
				var st api.MemberStatus
				found, _ := atomicfile.ReadJSON(filepath.Join(dir, member.StatusFile), &st)
				return found && strings.Contains(st.Message, strings.Split(c.err.Error(), ":")[0]) && !st.Serving
			})
			cancel()
			<-done
			if f.fences != c.fences+1 { // and once more as Run ends
				t.Fatalf("fenced %d times, want %d", f.fences, c.fences+1)
			}
		})
	}
}
