package api

import "time"

// History is what GET /v1/history answers: the samples the answering
// server took of the fleet, oldest first, one every Interval, as many as
// it keeps (its own memory: a server that just started has few).
type History struct {
	Interval string          `json:"interval"`
	Samples  []HistorySample `json:"samples"`
}

// HistorySample is the fleet at one time.
type HistorySample struct {
	At time.Time `json:"at"`
	// PerHour is what the live machines cost; LowerBoundPerHour the LP
	// bound of a plan for the same services (0 while unknown).
	PerHour           float64 `json:"perHour"`
	LowerBoundPerHour float64 `json:"lowerBoundPerHour"`
	// Allocated is what the replicas placed on live machines request;
	// Allocatable what those machines offer.
	Allocated   Resources `json:"allocated"`
	Allocatable Resources `json:"allocatable"`
	// Pending is how many replicas wait for a machine.
	Pending int `json:"pending"`
	// Heartbeats is how many heartbeats this server took in since the
	// sample before; HeartbeatP99Seconds the 99th percentile of the time
	// each took (an upper bound, from the histogram's buckets; 0 with
	// none).
	Heartbeats          uint64  `json:"heartbeats"`
	HeartbeatP99Seconds float64 `json:"heartbeatP99Seconds"`
}
