package cli

import (
	"errors"
	"fmt"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/client"
	"github.com/spf13/cobra"
)

func newDrainCmd(g *globals) *cobra.Command {
	var deadline time.Duration
	var wait bool
	var poll time.Duration
	cmd := &cobra.Command{
		Use:               "drain MACHINE [--deadline 10m] [--wait]",
		ValidArgsFunction: completeNames(g, "machines"),
		Short:             "Move a machine's replicas off (each new copy running before the old stops), then terminate it",
		Args:              cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			req := api.DrainRequest{}
			if deadline > 0 {
				req.Deadline = deadline.String()
			}
			m, err := c.Drain(cmd.Context(), args[0], req)
			if err != nil {
				return err
			}
			if m.FleetState == api.FleetDraining {
				fmt.Fprintf(g.out, "machine/%s draining (deadline %s)\n", m.ID, timePtr(m.DrainDeadline).Format(time.RFC3339))
			} else {
				fmt.Fprintf(g.out, "machine/%s already drained (%s)\n", m.ID, m.FleetState)
			}
			if !wait {
				return nil
			}
			return waitDrained(cmd, g, c, m.ID, poll)
		},
	}
	cmd.Flags().DurationVar(&deadline, "deadline", 0, "terminate even if replicas could not move after this long (default: the server's drain deadline)")
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until the machine is terminated, showing progress")
	cmd.Flags().DurationVar(&poll, "poll-interval", time.Second, "how often --wait checks")
	return cmd
}

func waitDrained(cmd *cobra.Command, g *globals, c *client.Client, id string, poll time.Duration) error {
	last := ""
	for {
		m, err := c.GetMachine(cmd.Context(), id)
		if err != nil {
			return err
		}
		rs, err := c.ListReplicas(cmd.Context(), "")
		if err != nil {
			return err
		}
		on := 0
		for _, r := range rs {
			if r.Machine == id || r.PreviousMachine == id {
				on++
			}
		}
		line := fmt.Sprintf("%s: %s, %d replica(s) on it", id, m.FleetState, on)
		if line != last {
			fmt.Fprintln(g.out, line)
			last = line
		}
		if m.FleetState == api.FleetTerminated {
			return nil
		}
		select {
		case <-cmd.Context().Done():
			return errors.New("interrupted; the drain goes on")
		case <-time.After(poll):
		}
	}
}

func newCordonCmd(g *globals, cordon bool) *cobra.Command {
	use, short, done := "cordon MACHINE", "Mark a machine unschedulable: new replicas go elsewhere, those it runs stay", "cordoned"
	if !cordon {
		use, short, done = "uncordon MACHINE", "Mark a cordoned machine schedulable again", "uncordoned"
	}
	return &cobra.Command{
		Use:               use,
		Short:             short,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeNames(g, "machines"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			m, err := c.Cordon(cmd.Context(), args[0], cordon)
			if err != nil {
				return err
			}
			fmt.Fprintf(g.out, "machine/%s %s\n", m.ID, done)
			return nil
		},
	}
}
