package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/failover/generic"
	"github.com/gantry-dev/gantry/failover/member"
	"github.com/gantry-dev/gantry/failover/postgres"
)

// newMemberCmd is what a failover group's replica runs: it keeps the
// software in the role the agent writes to $GANTRY_FAILOVER_DIR.
func newMemberCmd(g *globals) *cobra.Command {
	cfg := member.DefaultConfig("")
	startTimeout, stopTimeout, readyPoll := time.Minute, 10*time.Second, 100*time.Millisecond
	cmd := &cobra.Command{
		Use:    "member [-- COMMAND...]",
		Short:  "Run one side of a failover group (started by the agent)",
		Hidden: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := member.Dir()
			if err != nil {
				return err
			}
			cfg.Dir, cfg.Log = dir, slog.New(slog.NewTextHandler(os.Stderr, nil)).With("member", os.Getenv("GANTRY_REPLICA"))
			as, err := waitRole(cmd.Context(), dir, cfg.PollInterval)
			if err != nil {
				return err
			}
			switch as.Capability.Name {
			case api.CapabilityPostgres:
				pc, err := postgresConfig(as.Capability, dir, startTimeout, stopTimeout, readyPoll, cfg.Log)
				if err != nil {
					return err
				}
				pg, err := postgres.New(pc)
				if err != nil {
					return err
				}
				return member.Run(cmd.Context(), pg, cfg)
			case api.CapabilityGeneric:
				if len(args) == 0 || as.Capability.Generic == nil {
					return errors.New("the generic capability needs the command to run after --")
				}
				gc := generic.New(generic.Config{GenericCapability: *as.Capability.Generic, Command: args, Dir: dir, StopTimeout: stopTimeout})
				return member.Run(cmd.Context(), gc, cfg)
			}
			return fmt.Errorf("unknown capability %q", as.Capability.Name)
		},
	}
	f := cmd.Flags()
	f.DurationVar(&cfg.PollInterval, "poll-interval", cfg.PollInterval, "how often the role is read and the software checked")
	f.DurationVar(&cfg.StepTimeout, "step-timeout", cfg.StepTimeout, "bound of one transition (seeding a replica included)")
	f.DurationVar(&startTimeout, "start-timeout", startTimeout, "how long the software may take to start")
	f.DurationVar(&stopTimeout, "stop-timeout", stopTimeout, "how long a clean stop may take before a harder one")
	f.DurationVar(&readyPoll, "ready-poll", readyPoll, "how often a starting server is tried")
	return cmd
}

// waitRole waits for the agent's first role file.
func waitRole(ctx context.Context, dir string, poll time.Duration) (*api.FailoverAssignment, error) {
	for {
		as, err := member.ReadRole(dir)
		if err != nil {
			return nil, err
		}
		if as != nil {
			return as, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(poll):
		}
	}
}

func postgresConfig(c api.FailoverCapability, dir string, start, stop, readyPoll time.Duration, log *slog.Logger) (postgres.Config, error) {
	if c.Postgres == nil {
		return postgres.Config{}, errors.New("postgres capability without settings")
	}
	port, err := strconv.Atoi(os.Getenv("PORT"))
	if err != nil {
		return postgres.Config{}, errors.New("PORT is not set: the group's template needs a port")
	}
	pc := postgres.Config{PostgresCapability: *c.Postgres, Dir: dir, Machine: os.Getenv("GANTRY_MACHINE"), Group: filepath.Base(dir), Port: port, StartTimeout: start, StopTimeout: stop, ReadyPoll: readyPoll, Log: log}
	if env := c.Postgres.PasswordEnv; env != "" {
		pc.Password = os.Getenv(env)
		if pc.Password == "" {
			return postgres.Config{}, fmt.Errorf("passwordEnv %s is empty", env)
		}
	}
	return pc, nil
}
