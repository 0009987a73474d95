package agent

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/failover/member"
	"github.com/gantry-dev/gantry/internal/atomicfile"
)

// Files of a failover member's directory, shared with the member (the
// `gantry member` process): the agent keeps the role current, the member
// keeps its status current.
const (
	MemberRoleFile   = "role.json"
	MemberStatusFile = "status.json"
	// MemberDirEnv tells the member where its directory is.
	MemberDirEnv = "GANTRY_FAILOVER_DIR"
)

// memberDir is where a failover group's member keeps its role, status
// and data on this machine (one member per group per machine).
func (a *Agent) memberDir(group string) string {
	dir := filepath.Join(a.cfg.DataDir, "failover", group)
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs // the member runs in its own working directory
	}
	return dir
}

// writeRole tells a member its role (when it changed); a role change
// restarts nothing. A primary's role carries when its lease runs out for
// the member: LeaseStopAfter of the lease after the last renewal this
// agent sent, as the agent's own watch counts it.
func (a *Agent) writeRole(f *api.FailoverAssignment) {
	a.mu.Lock()
	if f.Role == api.RolePrimary && f.LeaseSeconds > 0 && !a.renewedAt.IsZero() {
		withExpiry := *f
		expiry := a.renewedAt.Add(a.leaseStop(f.LeaseSeconds)).UTC()
		withExpiry.LeaseExpiresAt = &expiry
		f = &withExpiry
	}
	last, ok := a.roles[f.Group]
	a.mu.Unlock()
	if ok && reflect.DeepEqual(last, *f) {
		return
	}
	dir := a.memberDir(f.Group)
	err := os.MkdirAll(dir, 0o700)
	if err == nil {
		err = atomicfile.WriteJSON(filepath.Join(dir, member.RoleFile), f)
	}
	if err != nil {
		a.log.Error("write failover role", "group", f.Group, "err", err)
		return
	}
	a.mu.Lock()
	a.roles[f.Group] = *f
	a.mu.Unlock()
}

// memberStatus is what a member last reported of itself.
func (a *Agent) memberStatus(group string) *api.MemberStatus {
	st, _ := member.ReadStatus(a.memberDir(group))
	return st
}

// renewed records a heartbeat the server answered, sent at sentAt: it
// renews the lease of every primary on this machine.
func (a *Agent) renewed(sentAt time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if sentAt.After(a.renewedAt) {
		a.renewedAt = sentAt
	}
}

// watchLeases stops every primary whose lease this agent could not renew
// in time: it stops LeaseStopAfter of the lease after the last renewal
// it sent, before the server may count the lease expired (the server
// counts from when it received that renewal, which is later). This
// overrides "keep running while the server is away", for primaries only.
func (a *Agent) watchLeases(ctx context.Context) {
	ticker := a.leaseClock().NewTicker(a.cfg.LeaseCheckInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		}
		expired, renewedAt := a.expiredPrimaries()
		for _, e := range expired {
			a.log.Warn("lease not renewed in time: stopping the failover primary", "replica", e.s.assignment.ReplicaID,
				"group", e.role.Group, "lastRenewal", renewedAt.UTC().Format(time.RFC3339Nano))
			fenced := e.role
			fenced.Role = api.RoleFenced
			a.writeRole(&fenced)
			e.s.haltWithin(a.cfg.LeaseStopTimeout)
		}
	}
}

// expiredPrimaries takes out of the agent's hands the primaries whose
// lease runs out; the next answered heartbeat starts them again in the
// role the server gives.
func (a *Agent) expiredPrimaries() ([]expiredPrimary, time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []expiredPrimary
	for id, s := range a.supervisors {
		if f := s.role(); a.leaseRanOut(f) {
			out = append(out, expiredPrimary{s: s, role: *f})
			delete(a.supervisors, id)
		}
	}
	return out, a.renewedAt
}

// leaseRanOut: f is a primary's role whose lease ran out LeaseStopAfter
// after the last renewal (a.mu held).
func (a *Agent) leaseRanOut(f *api.FailoverAssignment) bool {
	return f != nil && f.Role == api.RolePrimary && a.leaseClock().Since(a.renewedAt) > a.leaseStop(f.LeaseSeconds)
}

// leaseStop is how long after its last renewal a primary stops.
func (a *Agent) leaseStop(leaseSeconds int) time.Duration {
	return time.Duration(float64(time.Duration(leaseSeconds)*time.Second) * a.cfg.LeaseStopAfter)
}

type expiredPrimary struct {
	s    *supervisor
	role api.FailoverAssignment
}
