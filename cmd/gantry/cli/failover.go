package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/client"
)

func failoverTable(list []api.FailoverGroup) *table {
	t := &table{header: []string{"NAME", "PHASE", "EPOCH", "PRIMARY", "ENDPOINT", "MODE", "AGE"}, wide: []string{"REPLICA", "CAPABILITY", "LAST-FAILOVER"}}
	for _, g := range list {
		st := g.Status
		if st == nil {
			st = &api.FailoverGroupInfo{}
		}
		replica, last := "", ""
		for _, m := range st.Members {
			if m.Cluster != st.Primary {
				replica = m.Cluster
			}
		}
		if st.LastFailover != nil {
			last = age(*st.LastFailover)
		}
		t.add(g.Metadata.Name, st.Phase, strconv.FormatInt(st.Epoch, 10), orDash(st.Primary), orDash(st.Endpoint), g.Spec.Mode,
			age(timePtr(g.Metadata.CreatedAt)), replica, g.Spec.Capability.Name, orDash(last))
	}
	return t
}

func newFailoverCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "failover (status|promote|revert) NAME",
		Short: "Show a failover group, promote its replica side, or revert to its spec's primary side",
	}
	status := &cobra.Command{
		Use:               "status NAME",
		Short:             "Show which side is primary, the epoch, and each member's role",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeNames(g, "failovergroups"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			fg, err := c.GetFailoverGroup(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			printFailoverStatus(g.out, fg)
			return nil
		},
	}
	cmd.AddCommand(status, failoverAction(g, api.FailoverPromote, "Promote the replica side (a planned switchover; a fenced failover when the primary failed)"),
		failoverAction(g, api.FailoverRevert, "Switch back to the spec's primary side once it replicates again"))
	return cmd
}

func failoverAction(g *globals, action, short string) *cobra.Command {
	var wait, acceptDataLoss bool
	var timeout, poll time.Duration
	cmd := &cobra.Command{
		Use:               action + " NAME",
		Short:             short,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeNames(g, "failovergroups"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			before, err := c.GetFailoverGroup(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			request := action
			if acceptDataLoss {
				request = api.FailoverPromoteAcceptDataLoss
			}
			if err := c.RequestFailover(cmd.Context(), args[0], request); err != nil {
				return err
			}
			fmt.Fprintf(g.out, "failovergroup/%s %s requested\n", args[0], request)
			if !wait {
				return nil
			}
			return waitPromoted(cmd, g, c, args[0], before.Status.Epoch, timeout, poll)
		},
	}
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until the new primary serves and the other side replicates from it (phase Healthy)")
	if action == api.FailoverPromote {
		cmd.Flags().BoolVar(&acceptDataLoss, "accept-data-loss", false, "promote even a replica that was not synchronous (or lagged) as of the failed primary's last report: the writes it lacks are lost")
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long --wait waits")
	cmd.Flags().DurationVar(&poll, "poll-interval", 500*time.Millisecond, "how long --wait waits before it opens a broken watch of the group again")
	return cmd
}

// waitPromoted waits for a new epoch with both sides healthy again,
// printing each phase it passes.
// It reads the group again when the change feed says the group (its
// phase) or a replica (its members) changed.
func waitPromoted(cmd *cobra.Command, g *globals, c *client.Client, name string, epoch int64, timeout, poll time.Duration) error {
	ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
	defer cancel()
	changed := c.Changes(ctx, client.WatchOptions{Reconnect: poll}, "/v1/failovergroups", "/v1/replicas")
	last := ""
	members := memberReasons{}
	for {
		fg, err := c.GetFailoverGroup(cmd.Context(), name)
		if err != nil {
			return err
		}
		st := fg.Status
		if line := st.Phase + ": " + st.Message; line != last {
			fmt.Fprintf(g.out, "  %s\n", strings.TrimSuffix(line, ": "))
			last = line
		}
		if err := members.say(ctx, g.out, c, name, st.Members); err != nil {
			return err
		}
		if st.Epoch > epoch && st.Phase == "Healthy" {
			fmt.Fprintf(g.out, "failovergroup/%s: cluster %s primary at epoch %d, serving at %s; the other side replicates\n", name, st.Primary, st.Epoch, st.Endpoint)
			return nil
		}
		if waitForChange(ctx, changed, poll) != nil {
			if err := cmd.Context().Err(); err != nil {
				return err
			}
			return fmt.Errorf("failovergroup/%s: no new primary within %s (phase %s)", name, timeout, st.Phase)
		}
	}
}

// memberReasons prints, once each, why a member of a group does not
// serve or replicate yet (its replica's state, health and the member's own
// message); a member's replica that no machine will ever hold fails the
// wait at once.
type memberReasons map[string]string

func (said memberReasons) say(ctx context.Context, out io.Writer, c *client.Client, group string, members []api.FailoverMember) error {
	for _, m := range members {
		why := memberWhy(m)
		if why == "" || said[m.Cluster] == why {
			continue
		}
		said[m.Cluster] = why
		fmt.Fprintf(out, "  member %s (%s): %s\n", m.Cluster, m.Role, why)
		if m.State != string(api.ReplicaPending) || m.Replica == "" {
			continue
		}
		r, err := c.GetReplica(ctx, m.Replica)
		if err != nil {
			continue // gone meanwhile: the next change says more
		}
		if reason, ok := strings.CutPrefix(r.Reason, api.ReasonUnschedulable); ok {
			return fmt.Errorf("failovergroup/%s: the replica of cluster %s can never be placed as the spec stands: %s", group, m.Cluster, reason)
		}
	}
	return nil
}

// memberWhy is why a member does not serve (primary) or replicate yet,
// "" when it does.
func memberWhy(m api.FailoverMember) string {
	if m.State == string(api.ReplicaRunning) && m.Health != api.HealthUnhealthy && m.Message == "" {
		return ""
	}
	parts := []string{orText(m.State, "no replica")}
	if m.Health != "" {
		parts = append(parts, string(m.Health))
	}
	if m.Message != "" {
		parts = append(parts, m.Message)
	}
	return strings.Join(parts, ": ")
}

// walPosition shows a member's WAL position as PostgreSQL writes an LSN:
// a primary's flushed, a standby's received (and whether it streams).
func walPosition(r *api.ReplicationStatus) string {
	if r == nil {
		return "-"
	}
	lsn := func(p uint64) string { return fmt.Sprintf("%X/%X", p>>32, p&0xffffffff) }
	if r.Name == "" {
		return "flushed " + lsn(r.FlushPosition)
	}
	streaming := "not streaming"
	if r.Streaming {
		streaming = "streaming"
	}
	return "received " + lsn(r.ReceivedPosition) + " (" + streaming + ")"
}

func printFailoverStatus(w io.Writer, fg *api.FailoverGroup) {
	st := fg.Status
	fmt.Fprintf(w, "Name:      %s\nPhase:     %s\nEpoch:     %d\nPrimary:   %s\nEndpoint:  %s\nMode:      %s\n", fg.Metadata.Name, st.Phase, st.Epoch,
		orDash(st.Primary), orDash(st.Endpoint), fg.Spec.Mode)
	if st.Message != "" {
		fmt.Fprintf(w, "Message:   %s\n", st.Message)
	}
	if st.LastFailover != nil {
		fmt.Fprintf(w, "Last failover: %s\n", st.LastFailover.UTC().Format(time.RFC3339))
	}
	if fg.Spec.Capability.Name == api.CapabilityPostgres {
		fmt.Fprintf(w, "Synchronous standby: %s\n", orDash(st.SyncStandby))
	}
	t := &table{header: []string{"CLUSTER", "HOME", "ROLE", "SERVING", "EPOCH", "REPLICA", "MACHINE", "ENDPOINT", "HEALTH", "WAL"}}
	for _, m := range st.Members {
		t.add(m.Cluster, m.Home, m.Role, strconv.FormatBool(m.Serving), strconv.FormatInt(m.Epoch, 10), orDash(m.Replica), orDash(m.Machine), orDash(m.Endpoint), orDash(string(m.Health)), walPosition(m.Replication))
	}
	fmt.Fprintln(w, "Members:")
	_ = t.print(w, false)
	for _, m := range st.Members {
		if m.Message != "" {
			fmt.Fprintf(w, "  %s: %s\n", m.Cluster, m.Message)
		}
	}
}
