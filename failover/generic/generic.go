// Package generic is the failover capability for any software: it runs
// the group's command and calls the group's hook commands on each
// transition (promote, demote, replicate), with the role in the
// environment: GANTRY_FAILOVER_ROLE, GANTRY_FAILOVER_EPOCH and
// GANTRY_FAILOVER_PRIMARY (host:port of the primary).
package generic

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/failover/member"
)

// Config is the software and its hooks.
type Config struct {
	api.GenericCapability
	Command []string
	// Dir is the member's directory (its role file).
	Dir         string
	StopTimeout time.Duration
}

// Generic is the capability.
type Generic struct {
	cfg Config
	*member.Child
}

// New returns the capability.
func New(cfg Config) *Generic {
	return &Generic{cfg: cfg, Child: member.NewChild()}
}

// env is the member's environment with its role as told.
func (g *Generic) env(role string, primary string) []string {
	epoch := int64(0)
	if as, err := member.ReadRole(g.cfg.Dir); err == nil && as != nil {
		epoch = as.Epoch
		if primary == "" {
			primary = as.Primary
		}
	}
	env := os.Environ()
	for k, v := range member.Environment(role, epoch, primary) {
		env = append(env, k+"="+v)
	}
	return env
}

func (g *Generic) start(role, primary string) error {
	if g.Running() {
		return nil
	}
	cmd := exec.Command(g.cfg.Command[0], g.cfg.Command[1:]...)
	cmd.Env, cmd.Stdout, cmd.Stderr = g.env(role, primary), os.Stdout, os.Stderr
	return g.Child.Start(cmd)
}

func (g *Generic) hook(ctx context.Context, name string, command []string, role, primary string) error {
	if len(command) == 0 {
		return nil
	}
	cmd := exec.CommandContext(ctx, command[0], command[1:]...)
	cmd.Env = g.env(role, primary)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s hook: %w: %s", name, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Deploy implements member.Capability.
func (g *Generic) Deploy(ctx context.Context, bootstrap bool) error {
	return g.start(api.RolePrimary, "")
}

// Replicate implements member.Capability.
func (g *Generic) Replicate(ctx context.Context, primary string) error {
	if err := g.hook(ctx, "replicate", g.cfg.Replicate, api.RoleReplica, primary); err != nil {
		return err
	}
	return g.start(api.RoleReplica, primary)
}

// Promote implements member.Capability.
func (g *Generic) Promote(ctx context.Context) error {
	return g.hook(ctx, "promote", g.cfg.GenericCapability.Promote, api.RolePrimary, "")
}

// Demote implements member.Capability: the demote hook when there is
// one, else a restart as replica.
func (g *Generic) Demote(ctx context.Context, primary string) error {
	if len(g.cfg.GenericCapability.Demote) > 0 && g.Running() {
		return g.hook(ctx, "demote", g.cfg.GenericCapability.Demote, api.RoleReplica, primary)
	}
	if err := g.Fence(ctx); err != nil {
		return err
	}
	return g.Replicate(ctx, primary)
}

// Fence implements member.Capability: SIGTERM, SIGKILL after StopTimeout.
func (g *Generic) Fence(ctx context.Context) error {
	if !g.Running() {
		return nil
	}
	exited := g.Exited()
	_ = g.Signal(syscall.SIGTERM, true)
	select {
	case <-exited:
		return nil
	case <-time.After(g.cfg.StopTimeout):
	case <-ctx.Done():
	}
	_ = g.Signal(syscall.SIGKILL, true)
	<-exited
	return nil
}

// Health implements member.Capability: the command runs, and the health
// hook, when there is one, exits 0.
func (g *Generic) Health(ctx context.Context) error {
	if !g.Running() {
		return errors.New("not running")
	}
	return g.hook(ctx, "health", g.cfg.GenericCapability.Health, roleOf(g.cfg.Dir), "")
}

// roleOf is the role the member was last told.
func roleOf(dir string) string {
	if as, err := member.ReadRole(dir); err == nil && as != nil {
		return as.Role
	}
	return ""
}
