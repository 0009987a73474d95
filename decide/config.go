package decide

import (
	"time"

	"github.com/gantry-dev/gantry/planner"
)

// Config is every knob of the decisions.
type Config struct {
	// HeartbeatInterval is the agents' base heartbeat period;
	// MaxHeartbeatsPerSecond stretches it for large fleets.
	HeartbeatInterval      time.Duration
	MaxHeartbeatsPerSecond float64
	// MissedHeartbeats after which a joined machine is unreachable (and
	// replaced at once); its replicas move after RescheduleGrace.
	MissedHeartbeats int
	RescheduleGrace  time.Duration
	// LaunchBackoff is the first wait after a failed launch in a group; it
	// doubles per consecutive failure up to MaxLaunchBackoff.
	LaunchBackoff    time.Duration
	MaxLaunchBackoff time.Duration
	// UnavailableTTL is how long an offering that ran out of capacity is
	// avoided.
	UnavailableTTL time.Duration
	// DrainDeadline bounds how long a machine the planner removes may take
	// to move its replicas off.
	DrainDeadline time.Duration
	// LaunchTimeout is how long an instance may take to be running;
	// JoinTimeout how long a launched machine may take to join.
	LaunchTimeout time.Duration
	JoinTimeout   time.Duration
	// DescribeInterval is how soon a machine that has not joined is
	// looked up at its provider again after its instance became known;
	// the wait then grows with the instance's age (the time since it
	// became known) up to MaxDescribeInterval, so a fleet that boots
	// hundreds of machines does not call the provider for each every few
	// seconds while their agents take a minute to join.
	DescribeInterval    time.Duration
	MaxDescribeInterval time.Duration
	// ResyncInterval is how often each provider's tagged instances are
	// listed to find lost and leaked ones (and once when a server starts
	// leading).
	ResyncInterval time.Duration
	// TerminateBackoff is the first wait after a failed terminate; it
	// doubles up to MaxTerminateBackoff. A machine still terminating after
	// StuckAfter is reported.
	TerminateBackoff    time.Duration
	MaxTerminateBackoff time.Duration
	StuckAfter          time.Duration
	// OrphanGrace: a tagged instance the store does not know is terminated
	// only once it is older than this.
	OrphanGrace time.Duration
	// MaxSpreadMoves bounds the replicas moved in one pass to repair a
	// spread that machine churn left violated.
	MaxSpreadMoves int
	// RebookShare: when more than this share of the replicas changed
	// since the last pass's booking, a pass books every machine afresh,
	// which is then quicker than finding the ones the changes touched.
	RebookShare float64
	// WalkShare: when the entries a pass would walk for idle times
	// (those booked afresh, and those the last walk found empty or
	// young) are more than this share of its view, it walks every entry,
	// which is then as quick.
	WalkShare float64
	// LayOutShare: when more than this share of the booking's machines
	// were booked afresh since its machines were last laid side by side in
	// memory, a pass lays them out again (a copy of each machine's
	// fields, not of its replicas), for the walks of every machine.
	LayOutShare float64
	// ConsolidateInterval is the least time between two passes that look
	// for machines to remove or replace (0: every pass), as Karpenter's
	// disruption loop and the Cluster Autoscaler's scan look every ten
	// seconds: a fleet that changes every second does not walk each of
	// its machines' what-ifs every second. A pass in between that could
	// consolidate wakes when the interval is over.
	ConsolidateInterval time.Duration
	Planner             planner.Config
}

// DefaultConfig returns production defaults.
func DefaultConfig() Config {
	return Config{
		HeartbeatInterval: 5 * time.Second, MaxHeartbeatsPerSecond: 5000, MissedHeartbeats: 3, RescheduleGrace: 30 * time.Second,
		LaunchBackoff: 5 * time.Second, MaxLaunchBackoff: 5 * time.Minute, UnavailableTTL: 3 * time.Minute, DrainDeadline: 10 * time.Minute,
		LaunchTimeout: 5 * time.Minute, JoinTimeout: 10 * time.Minute, DescribeInterval: 5 * time.Second, MaxDescribeInterval: 30 * time.Second, ResyncInterval: 5 * time.Minute,
		TerminateBackoff: 5 * time.Second, MaxTerminateBackoff: 5 * time.Minute, StuckAfter: 15 * time.Minute, OrphanGrace: 2 * time.Minute,
		MaxSpreadMoves: 1, RebookShare: 0.25, WalkShare: 0.5, LayOutShare: 0.125, ConsolidateInterval: 10 * time.Second,
		Planner: planner.DefaultConfig(),
	}
}

// HeartbeatInterval is the period agents are told to use: the base
// period, stretched so a fleet of liveMachines sends at most
// MaxHeartbeatsPerSecond.
func (c Config) HeartbeatIntervalFor(liveMachines int) time.Duration {
	iv := c.HeartbeatInterval
	if c.MaxHeartbeatsPerSecond > 0 {
		if sized := time.Duration(float64(liveMachines) / c.MaxHeartbeatsPerSecond * float64(time.Second)); sized > iv {
			iv = sized
		}
	}
	return iv
}

// DescribeWait is how long after a describe at describedAt a machine
// whose instance became known at knownAt is described again: as long as
// the instance was then known, at least DescribeInterval and at most
// MaxDescribeInterval (so the looks double as it boots).
func (c Config) DescribeWait(knownAt, describedAt time.Time) time.Duration {
	wait := describedAt.Sub(knownAt)
	if limit := max(c.MaxDescribeInterval, c.DescribeInterval); wait > limit {
		wait = limit
	}
	return max(wait, c.DescribeInterval)
}

// backoff is base doubled per earlier failure, at most limit.
func backoff(base, limit time.Duration, failures int) time.Duration {
	wait := base << failures
	if wait > limit || wait <= 0 || failures > 30 {
		return limit
	}
	return wait
}
