package api

import "time"

// UpdatePolicy is how a new revision of a service replaces the old one.
type UpdatePolicy struct {
	// MaxSurge is how many replicas above the desired count may run during
	// a deployment (default 1).
	MaxSurge *int `json:"maxSurge,omitempty"`
	// MaxUnavailable is how many replicas below the desired count may be
	// unavailable because of a deployment (default 0).
	MaxUnavailable *int `json:"maxUnavailable,omitempty"`
	// MinHealthySeconds is how long a new replica must be running and
	// healthy before it counts as available (and an old one stops).
	MinHealthySeconds int `json:"minHealthySeconds,omitempty"`
	// ProgressDeadlineSeconds: a deployment that makes no progress for
	// this long fails (default 600).
	ProgressDeadlineSeconds int `json:"progressDeadlineSeconds,omitempty"`
	// AutoRevert returns a failed deployment's service to its last good
	// revision (default true).
	AutoRevert *bool `json:"autoRevert,omitempty"`
	// Canary replicas of a new revision start first, beside the old ones;
	// the rest follow once promoted.
	Canary int `json:"canary,omitempty"`
	// CanaryWeight is the percent of requests the canaries take, together,
	// until promoted (the ingress's and the SRV answers' weights); 0: each
	// serving replica takes an equal share.
	CanaryWeight int `json:"canaryWeight,omitempty"`
	// AutoPromote promotes the canaries once they are all available.
	AutoPromote bool `json:"autoPromote,omitempty"`
	// Paused stops a deployment where it is (`gantry rollout pause`).
	Paused bool `json:"paused,omitempty"`
	// RevisionHistory is how many old revisions are kept (default 10).
	RevisionHistory *int `json:"revisionHistory,omitempty"`
	// DrainSeconds is how long a serving replica that a deployment, a
	// scale-down or a deletion removes stays out of the service's name
	// (still running) before it is stopped: long enough for every agent's
	// DNS to drop it and the clients' cached answers to expire (default
	// 3: the agents' DNS TTL of 1 s, plus 2). 0 stops it at once.
	DrainSeconds *int `json:"drainSeconds,omitempty"`
}

// Defaults of an update policy (spec.Default writes them into stored
// specs; the methods below fall back on them for a spec that was not).
const (
	DefaultMaxSurge                = 1
	DefaultMaxUnavailable          = 0
	DefaultProgressDeadlineSeconds = 600
	DefaultRevisionHistory         = 10
	DefaultDrainSeconds            = 3
)

// Surge is MaxSurge with its default.
func (u UpdatePolicy) Surge() int { return intOr(u.MaxSurge, DefaultMaxSurge) }

// Unavailable is MaxUnavailable with its default.
func (u UpdatePolicy) Unavailable() int { return intOr(u.MaxUnavailable, DefaultMaxUnavailable) }

// History is RevisionHistory with its default.
func (u UpdatePolicy) History() int { return intOr(u.RevisionHistory, DefaultRevisionHistory) }

// Reverts is AutoRevert with its default (true).
func (u UpdatePolicy) Reverts() bool { return u.AutoRevert == nil || *u.AutoRevert }

// ProgressDeadline is ProgressDeadlineSeconds with its default.
func (u UpdatePolicy) ProgressDeadline() time.Duration {
	if u.ProgressDeadlineSeconds <= 0 {
		return DefaultProgressDeadlineSeconds * time.Second
	}
	return time.Duration(u.ProgressDeadlineSeconds) * time.Second
}

// Drain is DrainSeconds with its default, as a duration.
func (u UpdatePolicy) Drain() time.Duration {
	return time.Duration(intOr(u.DrainSeconds, DefaultDrainSeconds)) * time.Second
}

// MinHealthy is MinHealthySeconds as a duration.
func (u UpdatePolicy) MinHealthy() time.Duration {
	return time.Duration(u.MinHealthySeconds) * time.Second
}

func intOr(p *int, def int) int {
	if p == nil {
		return def
	}
	return *p
}

// Revision is one version of what a service's replicas run. Every change
// to it (image, command, env, Secrets used, resources, ports, health
// check, placement) makes a new one; the replica count and the update
// policy are not part of it.
type Revision struct {
	Service string `json:"service"`
	// Number orders revisions; returning to an older one (undo, revert)
	// gives it the next number, as kubectl does.
	Number int64  `json:"number"`
	Hash   string `json:"hash"`
	// Generation is the service generation that (last) asked for it.
	Generation int64       `json:"generation,omitempty"`
	Spec       ServiceSpec `json:"spec"`
	// Cause says what made it: apply, restart, undo or revert.
	Cause     string    `json:"cause,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
	// Failed says why a deployment of this revision failed.
	Failed string `json:"failed,omitempty"`
}

// Deployment states.
const (
	DeployProgressing = "Progressing"
	// DeployWaitingPromotion: the canaries are available; the rest waits
	// for `gantry rollout promote`.
	DeployWaitingPromotion = "WaitingPromotion"
	DeployPaused           = "Paused"
	DeployComplete         = "Complete"
	DeployFailed           = "Failed"
)

// Deployment is a service's move to its current revision, as the control
// loop keeps it (durable, so that another server resumes it).
type Deployment struct {
	Service string `json:"service"`
	// Generation is the service generation the control loop last saw
	// (`rollout status` waits for the one it applied).
	Generation int64 `json:"generation"`
	// Revision is the hash of the revision deployed; Stable the last
	// revision that completed, which a failed deployment returns to.
	Revision string `json:"revision"`
	Number   int64  `json:"number"`
	Stable   string `json:"stable,omitempty"`
	State    string `json:"state"`
	Reason   string `json:"reason,omitempty"`
	// RevertOf is the number of the failed revision this deployment
	// reverts.
	RevertOf   int64     `json:"revertOf,omitempty"`
	StartedAt  time.Time `json:"startedAt"`
	ProgressAt time.Time `json:"progressAt"`
	// AvailableSince is when each of the revision's replicas began to run
	// and pass its health check.
	AvailableSince map[string]time.Time `json:"availableSince,omitempty"`
	Promoted       bool                 `json:"promoted,omitempty"`
	// Counts as of the last pass.
	Desired   int `json:"desired"`
	Updated   int `json:"updated"`
	Available int `json:"available"`
	Old       int `json:"old"`
}

// Done reports whether the deployment ended (completed or failed).
func (d Deployment) Done() bool { return d.State == DeployComplete || d.State == DeployFailed }

// Rollout is what `gantry rollout` reads of a service: its deployment
// and revisions, newest last.
type Rollout struct {
	Deployment *Deployment `json:"deployment,omitempty"`
	Revisions  []Revision  `json:"revisions"`
}

// RolloutUndo asks to return a service to a revision (0: the one before
// the current).
type RolloutUndo struct {
	ToRevision int64 `json:"toRevision,omitempty"`
}

// ScaleRequest sets a service's replica count.
type ScaleRequest struct {
	Replicas int `json:"replicas"`
}
