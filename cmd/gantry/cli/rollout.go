package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/client"
	"github.com/gantry-dev/gantry/spec"
	"github.com/spf13/cobra"
)

func newRolloutCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rollout",
		Short: "Follow and steer a service's deployments (status, history, undo, restart, pause, resume, promote)",
	}
	cmd.AddCommand(newRolloutStatusCmd(g), newRolloutHistoryCmd(g), newRolloutDiffCmd(g), newRolloutUndoCmd(g),
		rolloutActionCmd(g, "restart", "Replace every replica through a new revision that runs the same thing"),
		rolloutActionCmd(g, "pause", "Pause the service's deployments where they are"),
		rolloutActionCmd(g, "resume", "Resume the service's deployments"),
		newRolloutPromoteCmd(g))
	return cmd
}

func newRolloutStatusCmd(g *globals) *cobra.Command {
	var watch bool
	var poll, timeout time.Duration
	cmd := &cobra.Command{
		Use:               "status SERVICE [-w] [--timeout D]",
		ValidArgsFunction: completeNames(g, "services"),
		Short:             "Show a service's deployment; with -w, follow it until it completes (exit 0) or fails (exit 1)",
		Args:              cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			svc, err := c.GetService(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			f := newFollower(g, c, svc, poll)
			if watch {
				return f.followFor(cmd.Context(), timeout)
			}
			return f.once(cmd.Context())
		},
	}
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "follow the deployment until it completes or fails")
	cmd.Flags().DurationVar(&poll, "poll-interval", time.Second, "how long -w waits before it opens a broken watch of the deployment again")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "with -w, give up after this long (0: wait as long as it takes)")
	return cmd
}

// follower follows a service's deployment of a generation.
type follower struct {
	g          *globals
	c          *client.Client
	service    string
	generation int64
	poll       time.Duration
	reverts    bool   // the service's update policy returns a failed revision
	target     string // hash of the revision the generation deploys
	last       string
	// said is the last reason printed for each replica.
	said map[string]string
}

func newFollower(g *globals, c *client.Client, svc *api.Service, poll time.Duration) *follower {
	return &follower{g: g, c: c, service: svc.Metadata.Name, generation: svc.Metadata.Generation, poll: poll, reverts: svc.Spec.Update.Reverts()}
}

func (f *follower) line(d *api.Deployment) string { return deploymentLine(f.service, d) }

// deploymentLine is a deployment's progress in one line.
func deploymentLine(service string, d *api.Deployment) string {
	s := fmt.Sprintf("service/%s revision %d %s: %d/%d updated, %d available, %d old", service, d.Number, d.State, d.Updated, d.Desired, d.Available, d.Old)
	switch d.State {
	case api.DeployWaitingPromotion:
		s += fmt.Sprintf(" (canaries ready: `gantry rollout promote %s`)", service)
	case api.DeployFailed, api.DeployPaused:
		if d.Reason != "" {
			s += ": " + d.Reason
		}
	}
	return s
}

func (f *follower) print(s string) {
	if s != f.last {
		fmt.Fprintln(f.g.out, s)
		f.last = s
	}
}

// once prints the deployment as it is; a failed one is an error.
func (f *follower) once(ctx context.Context) error {
	ro, err := f.c.Rollout(ctx, f.service)
	if err != nil {
		return err
	}
	if ro.Deployment == nil {
		f.print(fmt.Sprintf("service/%s: no deployment yet", f.service))
		return nil
	}
	f.print(f.line(ro.Deployment))
	if ro.Deployment.State == api.DeployFailed {
		return fmt.Errorf("deployment of revision %d failed: %s", ro.Deployment.Number, ro.Deployment.Reason)
	}
	return nil
}

// followFor follows for at most timeout (0: no limit).
func (f *follower) followFor(ctx context.Context, timeout time.Duration) error {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	err := f.follow(ctx)
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("service %s: the deployment did not end within %s (it goes on)", f.service, timeout)
	}
	return err
}

// follow prints each change of the deployment until the generation's
// revision completes (nil) or fails (an error, also once the service has
// been reverted).
// It reads the deployment again when the change feed says the service
// (its deployment's progress) or its replicas changed.
func (f *follower) follow(ctx context.Context) error {
	watchCtx, stop := context.WithCancel(ctx)
	defer stop()
	changed := f.c.Changes(watchCtx, client.WatchOptions{Reconnect: f.poll}, "/v1/services", "/v1/replicas?service="+url.QueryEscape(f.service))
	for {
		done, err := f.step(ctx)
		if done || err != nil {
			return err
		}
		if waitForChange(ctx, changed, f.poll) != nil {
			return errors.New("interrupted; the deployment goes on")
		}
	}
}

// reasons prints, as soon as it is known, why each replica of the
// revision being deployed is not serving (pending, crashing, unhealthy),
// once per reason; a replica no machine will ever hold fails the follow
// at once, rather than at the progress deadline.
func (f *follower) reasons(ctx context.Context) error {
	replicas, err := f.c.ListReplicas(ctx, f.service)
	if err != nil {
		return err
	}
	if f.said == nil {
		f.said = map[string]string{}
	}
	for _, r := range replicas {
		if r.SpecHash != f.target || r.RetiringSince != nil {
			continue
		}
		why := notServingWhy(r)
		if why == "" || f.said[r.ID] == why {
			continue
		}
		f.said[r.ID] = why
		fmt.Fprintf(f.g.out, "  replica/%s %s\n", r.ID, why)
		if strings.HasPrefix(r.Reason, api.ReasonUnschedulable) {
			return fmt.Errorf("replica %s can never be placed as the spec stands: %s (unless the spec or the cluster changes, the revision fails at its progress deadline; `gantry rollout undo %s` goes back now)",
				r.ID, strings.TrimPrefix(r.Reason, api.ReasonUnschedulable), f.service)
		}
	}
	return nil
}

// notServingWhy is why a replica does not serve yet, "" when it does (or
// is on its way without a problem).
func notServingWhy(r api.Replica) string {
	switch {
	case r.State == api.ReplicaPending && r.Reason != "":
		return "pending: " + r.Reason
	case r.State == api.ReplicaCrashed || r.State == api.ReplicaFailed:
		return fmt.Sprintf("%s (restarts %d): %s", r.State, r.Restarts, r.Reason)
	case r.Health == api.HealthUnhealthy:
		return "unhealthy: " + orText(r.Reason, "its health check fails")
	}
	return ""
}

func (f *follower) step(ctx context.Context) (bool, error) {
	ro, err := f.c.Rollout(ctx, f.service)
	if err != nil {
		return false, err
	}
	d := ro.Deployment
	if d == nil || d.Generation < f.generation {
		f.print(fmt.Sprintf("service/%s: waiting for the control loop to take generation %d in", f.service, f.generation))
		return false, nil
	}
	if f.target == "" {
		// The revision this generation asked for: it may have failed and
		// been reverted before this first look.
		f.target = d.Revision
		if rev := revisionOfGeneration(ro, f.generation); rev != nil {
			f.target = rev.Hash
		}
	}
	f.print(f.line(d))
	if err := f.reasons(ctx); err != nil {
		return true, err
	}
	if d.Revision != f.target {
		if failed := failedRevision(ro, f.target); failed != nil {
			if !d.Done() {
				return false, nil // follow the revert to its end
			}
			return true, fmt.Errorf("revision %d failed: %s; the service is back on revision %d", failed.Number, failed.Failed, d.Number)
		}
		f.target = d.Revision // applied again since: follow that
		return false, nil
	}
	switch d.State {
	case api.DeployComplete:
		return true, nil
	case api.DeployFailed:
		if f.reverts && d.Stable != "" {
			return false, nil // the revert comes next
		}
		return true, fmt.Errorf("revision %d failed: %s", d.Number, d.Reason)
	}
	return false, nil
}

func revisionOfGeneration(ro *api.Rollout, generation int64) *api.Revision {
	for i := range ro.Revisions {
		if r := &ro.Revisions[i]; r.Generation == generation {
			return r
		}
	}
	return nil
}

func failedRevision(ro *api.Rollout, hash string) *api.Revision {
	for i := range ro.Revisions {
		if r := &ro.Revisions[i]; r.Hash == hash && r.Failed != "" {
			return r
		}
	}
	return nil
}

func newRolloutHistoryCmd(g *globals) *cobra.Command {
	var revision int64
	cmd := &cobra.Command{
		Use:               "history SERVICE [--revision N]",
		ValidArgsFunction: completeNames(g, "services"),
		Short:             "List a service's revisions, or show one",
		Args:              cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			ro, err := c.Rollout(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if revision != 0 {
				for _, r := range ro.Revisions {
					if r.Number == revision {
						fmt.Fprintf(g.out, "revision %d (%s) of service/%s:\n", r.Number, r.Cause, args[0])
						return printStructured(g.out, "yaml", r.Spec)
					}
				}
				return fmt.Errorf("service %s has no revision %d", args[0], revision)
			}
			printHistory(g.out, ro)
			return nil
		},
	}
	cmd.Flags().Int64Var(&revision, "revision", 0, "show the spec of this revision")
	return cmd
}

func newRolloutDiffCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:               "diff SERVICE FROM [TO]",
		ValidArgsFunction: completeNames(g, "services"),
		Short:             "Show what changed in a service's spec from one revision to another (default: the current one)",
		Args:              cobra.RangeArgs(2, 3),
		RunE: func(cmd *cobra.Command, args []string) error {
			var numbers [2]int64
			for i, arg := range args[1:] {
				n, err := strconv.ParseInt(arg, 10, 64)
				if err != nil || n < 1 {
					return fmt.Errorf("revision %q: want a revision number (see gantry rollout history %s)", arg, args[0])
				}
				numbers[i] = n
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			ro, err := c.Rollout(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			changes, err := spec.RevisionChanges(ro, numbers[0], numbers[1])
			if err != nil {
				return fmt.Errorf("service %s: %w", args[0], err)
			}
			if len(changes) == 0 {
				fmt.Fprintln(g.out, "the two revisions' specs are the same")
			}
			for _, ch := range changes {
				fmt.Fprintln(g.out, ch)
			}
			return nil
		},
	}
}

func printHistory(w io.Writer, ro *api.Rollout) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "REVISION\tCREATED\tSTATUS\tCAUSE")
	for _, r := range ro.Revisions {
		status := ""
		switch {
		case ro.Deployment != nil && r.Hash == ro.Deployment.Revision:
			status = "current (" + ro.Deployment.State + ")"
		case r.Failed != "":
			status = "failed: " + r.Failed
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", r.Number, r.CreatedAt.Local().Format(time.DateTime), status, r.Cause)
	}
	_ = tw.Flush()
}

func newRolloutUndoCmd(g *globals) *cobra.Command {
	var to int64
	cmd := &cobra.Command{
		Use:               "undo SERVICE [--to-revision N]",
		ValidArgsFunction: completeNames(g, "services"),
		Short:             "Return a service to an earlier revision (default: the last good one before the current)",
		Args:              cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			svc, err := c.RolloutAction(cmd.Context(), args[0], "undo", api.RolloutUndo{ToRevision: to})
			if err != nil {
				return err
			}
			fmt.Fprintf(g.out, "service/%s rolled back (generation %d)\n", svc.Metadata.Name, svc.Metadata.Generation)
			return nil
		},
	}
	cmd.Flags().Int64Var(&to, "to-revision", 0, "revision to return to (see `gantry rollout history`)")
	return cmd
}

func rolloutActionCmd(g *globals, action, short string) *cobra.Command {
	past := map[string]string{"restart": "restarted", "pause": "paused", "resume": "resumed"}[action]
	return &cobra.Command{
		Use:               action + " SERVICE",
		ValidArgsFunction: completeNames(g, "services"),
		Short:             short,
		Args:              cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			svc, err := c.RolloutAction(cmd.Context(), args[0], action, nil)
			if err != nil {
				return err
			}
			fmt.Fprintf(g.out, "service/%s %s\n", svc.Metadata.Name, past)
			return nil
		},
	}
}

func newRolloutPromoteCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:               "promote SERVICE",
		ValidArgsFunction: completeNames(g, "services"),
		Short:             "Let a deployment waiting on its canaries roll out the rest",
		Args:              cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			ro, err := c.Promote(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(g.out, "service/%s revision %d promoted\n", args[0], ro.Deployment.Number)
			return nil
		},
	}
}

func newScaleCmd(g *globals) *cobra.Command {
	var replicas int
	cmd := &cobra.Command{
		Use:   "scale service NAME --replicas N",
		Short: "Set a service's replica count (not a new revision: nothing restarts)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if kind := args[0]; kind != "service" && kind != "services" && kind != "svc" {
				return fmt.Errorf("only services scale, not %q", kind)
			}
			if !cmd.Flags().Changed("replicas") {
				return errors.New("--replicas is required")
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			svc, err := c.Scale(cmd.Context(), args[1], replicas)
			if err != nil {
				return err
			}
			fmt.Fprintf(g.out, "service/%s scaled to %s replicas\n", svc.Metadata.Name, strconv.Itoa(svc.Spec.DesiredReplicas()))
			return nil
		},
	}
	cmd.Flags().IntVar(&replicas, "replicas", 0, "the new replica count")
	return cmd
}
