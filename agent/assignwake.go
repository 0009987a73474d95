package agent

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/gantry-dev/gantry/client"
)

// watchAssignments heartbeats as soon as the server says the machine's
// assignments changed (a replica placed here starts without waiting out
// the heartbeat interval): a long poll, answered at a change or after
// the server's wait. A server that has no such poll is asked again only
// every NamesPollTimeout; the heartbeats carry the assignments anyway.
func (a *Agent) watchAssignments(ctx context.Context) {
	since := int64(-1) // the first poll: answered at once
	for ctx.Err() == nil {
		pollCtx, cancel := context.WithTimeout(ctx, a.cfg.NamesPollTimeout)
		got, err := a.pollClient().WaitAssignments(pollCtx, a.machineID, since)
		cancel()
		if err == nil {
			if got.Changed {
				a.nudge()
			}
			since = got.Revision
			continue
		}
		wait := a.cfg.RetryInterval
		if apiErr, ok := errors.AsType[*client.APIError](err); ok && apiErr.Status == http.StatusNotFound {
			wait = a.cfg.NamesPollTimeout // an older server
		}
		if ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) {
			a.log.Debug("assignments poll failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}
