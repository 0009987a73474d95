package cli

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/client"
	"github.com/spf13/cobra"
)

func newDescribeCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:               "describe (cluster|service|machine|replica) NAME | describe KIND/NAME",
		ValidArgsFunction: completeKindThenName(g),
		Short:             "Show one object in detail, with related objects and its events",
		Args:              cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, name, err := kindAndName(args, "clusters", "services", "machines", "replicas")
			if err != nil {
				return err
			}
			args = []string{kind, name}
			c, err := g.client()
			if err != nil {
				return err
			}
			return describe(cmd.Context(), g.out, c, kind, args[1])
		},
	}
}

func describe(ctx context.Context, w io.Writer, c *client.Client, kind, name string) error {
	var eventKind string
	switch kind {
	case "clusters":
		cl, err := c.GetCluster(ctx, name)
		if err != nil {
			return err
		}
		eventKind = api.KindCluster
		if err := printStructured(w, formatYAML, cl); err != nil {
			return err
		}
		machines, err := c.ListMachines(ctx, name)
		if err != nil {
			return err
		}
		section(w, "Machines")
		if err := machineTable(machines).print(w, false); err != nil {
			return err
		}
	case "services":
		svc, err := c.GetService(ctx, name)
		if err != nil {
			return err
		}
		eventKind = api.KindService
		if err := printStructured(w, formatYAML, svc); err != nil {
			return err
		}
		replicas, err := c.ListReplicas(ctx, name)
		if err != nil {
			return err
		}
		sort.SliceStable(replicas, func(i, j int) bool { return naturalLess(replicas[i].ID, replicas[j].ID) })
		section(w, "Replicas")
		if err := replicaTable(replicas).print(w, true); err != nil {
			return err
		}
		ro, err := c.Rollout(ctx, name)
		if err != nil {
			return err
		}
		section(w, "Deployment")
		if d := ro.Deployment; d != nil {
			fmt.Fprintln(w, deploymentLine(name, d))
		}
		printHistory(w, ro)
	case "machines":
		m, err := c.GetMachine(ctx, name)
		if err != nil {
			return err
		}
		eventKind = "Machine"
		if err := printStructured(w, formatYAML, m); err != nil {
			return err
		}
	case "replicas":
		r, err := c.GetReplica(ctx, name)
		if err != nil {
			return err
		}
		eventKind = "Replica"
		if err := printStructured(w, formatYAML, r); err != nil {
			return err
		}
	case "failovergroups":
		fg, err := c.GetFailoverGroup(ctx, name)
		if err != nil {
			return err
		}
		eventKind = api.KindFailoverGroup
		status := fg.Status
		fg.Status = nil
		if err := printStructured(w, formatYAML, fg); err != nil {
			return err
		}
		fg.Status = status
		section(w, "Status")
		printFailoverStatus(w, fg)
	default:
		return fmt.Errorf("describe takes a cluster, service, machine, replica or failovergroup")
	}
	events, err := c.ListEvents(ctx, client.EventQuery{Kind: eventKind, Name: name, Limit: 50})
	if err != nil {
		return err
	}
	section(w, "Events")
	if len(events) == 0 {
		fmt.Fprintln(w, "none")
		return nil
	}
	return eventTable(events).print(w, false)
}

func section(w io.Writer, title string) {
	fmt.Fprintf(w, "\n%s\n%s\n", title, strings.Repeat("-", len(title)))
}
