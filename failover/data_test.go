package failover_test

import (
	"slices"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/failover"
)

// syncWorld is a healthy synchronous group whose primary reports the
// replica as its synchronous standby.
func syncWorld(t *testing.T) (*world, *fakeSide, *fakeSide) {
	w := newWorld(t, true)
	w.g.Data = failover.DataRule{Enforced: true, Synchronous: true}
	primary, replica := w.sides[failover.HomePrimary], w.sides[failover.HomeReplica]
	replica.replication = &api.ReplicationStatus{Name: "west", Streaming: true, ReceivedPosition: 1000}
	primary.replication = &api.ReplicationStatus{FlushPosition: 1000, SyncStandby: "west"}
	w.healthy()
	if w.st.SyncStandby != replica.instance || w.st.SyncStandbyName != "west" {
		t.Fatalf("the primary's report was not recorded: %+v", w.st)
	}
	return w, primary, replica
}

func killPrimary(w *world, primary *fakeSide) {
	primary.down = true
	w.advance(time.Second, 1)
}

// The synchronous standby as of the primary's last report is promoted
// automatically after the fence.
func TestSynchronousStandbyIsPromoted(t *testing.T) {
	w, primary, _ := syncWorld(t)
	killPrimary(w, primary)
	if w.st.Phase != failover.PhaseFencing {
		t.Fatalf("phase %s, want Fencing", w.st.Phase)
	}
	w.sides[failover.HomePrimary].fence = failover.FenceConfirmed
	w.advance(w.g.Lease, 1)
	if w.st.Primary != failover.HomeReplica || w.st.Epoch != 2 {
		t.Fatalf("the synchronous standby was not promoted: %+v", w.st)
	}
}

// A primary that acknowledges writes alone (its standby stopped
// streaming, and it reported no synchronous standby) is not failed over
// automatically: the group waits in PrimaryFailed saying why, a plain
// manual promote is refused, and only --accept-data-loss promotes.
func TestStaleStandbyIsNotPromotedAutomatically(t *testing.T) {
	w, primary, replica := syncWorld(t)
	replica.replication = &api.ReplicationStatus{Name: "west", ReceivedPosition: 1000}
	primary.replication = &api.ReplicationStatus{FlushPosition: 5000}
	w.advance(time.Second, 1)
	if w.st.SyncStandby != "" || !slices.Contains(w.events, "SynchronousStandbyLost") {
		t.Fatalf("the lost synchronous standby was not recorded: %+v %v", w.st, w.events)
	}
	killPrimary(w, primary)
	w.advance(w.g.Lease, 2)
	if w.st.Phase != failover.PhasePrimaryFailed || len(w.fences) != 0 || w.st.Primary != failover.HomePrimary || !slices.Contains(w.events, "NotPromoting") {
		t.Fatalf("a stale standby is being promoted: %+v fences %v events %v", w.st, w.fences, w.events)
	}
	w.step(api.FailoverPromote)
	if w.st.Phase != failover.PhasePrimaryFailed || !slices.Contains(w.events, "RequestRefused") {
		t.Fatalf("a plain manual promote of a stale standby went ahead: %+v", w.st)
	}
	w.step(api.FailoverPromoteAcceptDataLoss)
	if w.st.Phase != failover.PhaseFencing {
		t.Fatalf("promote --accept-data-loss: phase %s, want Fencing", w.st.Phase)
	}
	w.sides[failover.HomePrimary].fence = failover.FenceConfirmed
	w.advance(w.g.Lease, 1)
	if w.st.Primary != failover.HomeReplica || w.st.AcceptDataLoss {
		t.Fatalf("the forced promotion did not finish cleanly: %+v", w.st)
	}
}

// Asynchronous groups promote a replica within MaximumLag of the
// primary's last reported position, and no other.
func TestAsynchronousPromotionKeepsTheLagLimit(t *testing.T) {
	for name, c := range map[string]struct {
		received uint64
		promoted bool
	}{"within the limit": {9000, true}, "too far behind": {1000, false}} {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, true)
			w.g.Data = failover.DataRule{Enforced: true, MaximumLag: 2000}
			primary, replica := w.sides[failover.HomePrimary], w.sides[failover.HomeReplica]
			primary.replication = &api.ReplicationStatus{FlushPosition: 10000}
			replica.replication = &api.ReplicationStatus{Name: "west", ReceivedPosition: c.received}
			w.healthy()
			killPrimary(w, primary)
			w.sides[failover.HomePrimary].fence = failover.FenceConfirmed
			w.advance(w.g.Lease, 2)
			if promoted := w.st.Primary == failover.HomeReplica; promoted != c.promoted {
				t.Fatalf("promoted %v, want %v: %+v", promoted, c.promoted, w.st)
			}
		})
	}
}

// The primary's report is what says whom its commits wait for: a standby
// whose own report is missing for a moment (a health check timed out) is
// still the synchronous standby it names; a standby replaced by a new
// instance is not.
func TestMissingStandbyReportKeepsTheRecord(t *testing.T) {
	w, _, replica := syncWorld(t)
	replica.replication = nil
	w.advance(time.Second, 1)
	if w.st.SyncStandby != replica.instance {
		t.Fatalf("a missing standby report dropped the record: %+v", w.st)
	}
	replica.instance = "pg-west-0@m9" // placed again: a new instance, empty
	w.advance(time.Second, 1)
	if w.st.SyncStandby != "" {
		t.Fatalf("a new instance inherited the synchronous standby record: %+v", w.st)
	}
}
