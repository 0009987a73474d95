// Package settings binds the control loop's decision knobs
// (decide.Config) to command-line flags: `gantry server` takes them, and
// a `gantry simulate` policy is a set of them (sim/policy), so a policy
// can set exactly what a server can.
package settings

import (
	"github.com/spf13/pflag"

	"github.com/gantry-dev/gantry/decide"
)

// Bind binds the decision knobs to flags on fs, defaults from d.
func Bind(fs *pflag.FlagSet, d *decide.Config) {
	fs.DurationVar(&d.HeartbeatInterval, "heartbeat-interval", d.HeartbeatInterval, "agents' base heartbeat period")
	fs.Float64Var(&d.MaxHeartbeatsPerSecond, "max-heartbeats-per-second", d.MaxHeartbeatsPerSecond, "stretch the heartbeat period of large fleets to stay under this rate")
	fs.IntVar(&d.MissedHeartbeats, "missed-heartbeats", d.MissedHeartbeats, "heartbeats a machine may miss before it is replaced")
	fs.DurationVar(&d.Planner.EmptyMachineTTL, "empty-machine-ttl", d.Planner.EmptyMachineTTL, "how long a machine above minSize stays empty before it is removed")
	fs.DurationVar(&d.LaunchBackoff, "launch-backoff", d.LaunchBackoff, "first wait after a failed launch (doubles per failure)")
	fs.DurationVar(&d.UnavailableTTL, "unavailable-ttl", d.UnavailableTTL, "how long an offering that ran out of capacity is avoided")
	fs.DurationVar(&d.Planner.MinLifetime, "min-lifetime", d.Planner.MinLifetime, "machines younger than this are never consolidated")
	fs.Float64Var(&d.Planner.SavingsFloor, "savings-floor", d.Planner.SavingsFloor, "least saving (fraction of its price) for replacing a machine with a cheaper one")
	fs.IntVar(&d.Planner.MaxRemovals, "max-removals", d.Planner.MaxRemovals, "most machines removed or replaced at once")
	fs.DurationVar(&d.ConsolidateInterval, "consolidate-interval", d.ConsolidateInterval, "least time between two looks for machines to remove or replace (0: every pass)")
	fs.DurationVar(&d.RescheduleGrace, "reschedule-grace", d.RescheduleGrace, "how long replicas of an unreachable machine wait for it before they move")
	fs.DurationVar(&d.LaunchTimeout, "launch-timeout", d.LaunchTimeout, "how long an instance may take to be running before it is replaced")
	fs.DurationVar(&d.JoinTimeout, "join-timeout", d.JoinTimeout, "how long a launched machine may take to join before it is replaced")
	fs.DurationVar(&d.TerminateBackoff, "terminate-backoff", d.TerminateBackoff, "first wait after a failed terminate (doubles per failure)")
	fs.DurationVar(&d.StuckAfter, "stuck-terminating-after", d.StuckAfter, "report a machine still terminating after this")
	fs.DurationVar(&d.OrphanGrace, "orphan-grace", d.OrphanGrace, "age before an unknown tagged instance is terminated on recovery")
	fs.DurationVar(&d.ResyncInterval, "resync-interval", d.ResyncInterval, "how often each provider's tagged instances are listed to find lost and leaked ones")
	fs.DurationVar(&d.DescribeInterval, "describe-interval", d.DescribeInterval, "how soon a machine that has not joined is looked up at its provider again (the wait grows as it boots)")
	fs.DurationVar(&d.MaxDescribeInterval, "max-describe-interval", d.MaxDescribeInterval, "longest wait between looks at a machine that has not joined")
	fs.DurationVar(&d.MaxLaunchBackoff, "max-launch-backoff", d.MaxLaunchBackoff, "longest wait between failed launches in a group")
	fs.DurationVar(&d.DrainDeadline, "drain-deadline", d.DrainDeadline, "how long a machine the planner removes may take to move its replicas off")
	fs.IntVar(&d.MaxSpreadMoves, "max-spread-moves", d.MaxSpreadMoves, "replicas moved per pass to repair a spread that machine churn left violated")
}
