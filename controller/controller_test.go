package controller

import (
	"testing"
	"time"
)

// The heartbeat period stretches with the fleet so the server receives at
// most MaxHeartbeatsPerSecond.
func TestHeartbeatIntervalIsSizedToTheFleet(t *testing.T) {
	c := &Controller{cfg: DefaultConfig()}
	if got := c.HeartbeatInterval(10); got != c.cfg.HeartbeatInterval {
		t.Fatalf("small fleet: %s, want the base %s", got, c.cfg.HeartbeatInterval)
	}
	if got := c.HeartbeatInterval(10000); got != 50*time.Second {
		t.Fatalf("10,000 machines at 200/s: %s, want 50s", got)
	}
}
