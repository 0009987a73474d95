package server

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/client"
)

// Deleting a replica is kubectl's delete of a Pod: it leaves its
// service's name at once (retiring, with an event saying why), its
// index is made again under a new name, and it is gone once drained.
func TestDeletingAReplicaMakesItsIndexAgain(t *testing.T) {
	ts, ctx := withTestCluster(t, nil)
	ts.joinManual(t, "dev", "m1")
	old := applyWebOnM1(t, ts)
	if err := ts.admin.DeleteReplica(ctx, old.ID); err != nil {
		t.Fatalf("delete replica: %v", err)
	}
	deleted, err := ts.admin.GetReplica(ctx, old.ID)
	if err != nil || deleted.RetiringSince == nil || deleted.RetireReason != "deleted by request" {
		t.Fatalf("the deleted replica right after: %+v %v, want it retiring (deleted by request)", deleted, err)
	}
	events, err := ts.admin.ListEvents(ctx, client.EventQuery{Kind: "Replica", Name: old.ID})
	if err != nil {
		t.Fatal(err)
	}
	if !hasReason(events, "Deleting") {
		t.Fatalf("events of %s: %+v, want Deleting", old.ID, events)
	}
	waitFor(t, 20*time.Second, "index 0 made again and the old replica gone", func() bool {
		list, err := ts.admin.ListReplicas(ctx, "web")
		if err != nil || len(list) != 1 {
			return false
		}
		return list[0].ID != old.ID && list[0].Index == 0 && list[0].RetiringSince == nil
	})
	// Deleting it again, or one that is gone, says so.
	err = ts.admin.DeleteReplica(ctx, old.ID)
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusNotFound {
		t.Fatalf("delete of a deleted replica: %v, want 404", err)
	}
}

func hasReason(events []api.Event, reason string) bool {
	for _, e := range events {
		if e.Reason == reason {
			return true
		}
	}
	return false
}
