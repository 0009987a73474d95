package sim

import (
	"slices"
	"time"
)

// Result is what one policy's run cost and did.
type Result struct {
	Policy   string   `json:"policy"`
	Settings []string `json:"settings,omitempty"`
	// Over is what the settings change ("": Gantry's defaults; a
	// server's simulations: its own settings).
	Over string `json:"over,omitempty"`
	// World names the world it ran in (Setup.WorldName).
	World string    `json:"world,omitempty"`
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// Cost is what every instance cost from its launch's answer until it
	// was gone, in dollars; Bound is the integral of the lower bound (the
	// cheapest capacity the demand of each time could run on, from the
	// planner's LP), and Gap Cost/Bound - 1.
	Cost  float64 `json:"cost"`
	Bound float64 `json:"bound"`
	Gap   float64 `json:"gap"`
	// MachineHours are by instance type and capacity type.
	MachineHours []TypeHours `json:"machineHours"`
	// Pending is how long replicas waited to run: from being wanted (made,
	// or their machine lost) until running.
	Pending Percentiles `json:"pending"`
	// WaitingAtEnd are the replicas still waiting when the run ended
	// (their waits end there): demand a policy never served, which its
	// cost does not show.
	WaitingAtEnd int         `json:"waitingAtEnd"`
	Disruptions  Disruptions `json:"disruptions"`
	Spot         Spot        `json:"spot"`
	Passes       Passes      `json:"passes"`
	// Series is the run over time, for plots.
	Series []Point `json:"series"`
}

// TypeHours are the machine-hours of one instance type and capacity type.
type TypeHours struct {
	InstanceType string  `json:"instanceType"`
	CapacityType string  `json:"capacityType"`
	Machines     int     `json:"machines"`
	Hours        float64 `json:"hours"`
	Cost         float64 `json:"cost"`
}

// Percentiles summarise waits.
type Percentiles struct {
	Count int           `json:"count"`
	P50   time.Duration `json:"p50"`
	P99   time.Duration `json:"p99"`
	Max   time.Duration `json:"max"`
	// ReplicaHours is the waits' sum: how much demand went unserved.
	ReplicaHours float64 `json:"replicaHours"`
}

// Disruptions are what the control loop did to running replicas and
// machines.
type Disruptions struct {
	// ReplicasMoved moved live (a new copy first): spread repair,
	// consolidation.
	ReplicasMoved int `json:"replicasMoved"`
	// ReplicasStopped stopped running before being wanted elsewhere: their
	// machine was lost, terminated or taken back, or they were preempted.
	ReplicasStopped int `json:"replicasStopped"`
	// MachinesReplaced by a cheaper one; MachinesConsolidated removed as
	// their replicas fit elsewhere; MachinesEmptied removed empty.
	MachinesReplaced     int `json:"machinesReplaced"`
	MachinesConsolidated int `json:"machinesConsolidated"`
	MachinesEmptied      int `json:"machinesEmptied"`
	// Terminations are by cause (decide's causes: drained, unreachable,
	// vanished, rollout, join-timeout, ...).
	Terminations map[string]int `json:"terminations"`
	// Launches are the launch intents; LaunchFailures those that ran out
	// of capacity.
	Launches       int `json:"launches"`
	LaunchFailures int `json:"launchFailures"`
}

// Spot is what spot interruptions did.
type Spot struct {
	Interruptions int `json:"interruptions"`
	// Pending is how long the replicas of interrupted machines waited to
	// run again.
	Pending Percentiles `json:"pending"`
}

// Passes are the control loop's passes.
type Passes struct {
	Total int `json:"total"`
	// Acting passes changed something; Steps are the changes they planned
	// (replicas placed, machines launched, ...).
	Acting int `json:"acting"`
	Steps  int `json:"steps"`
	// StepsPerPass is Steps over Total.
	StepsPerPass float64 `json:"stepsPerPass"`
	// Unsettled are the instants whose passes still acted after the
	// world's maxPassesPerInstant: the loop passed again a second later.
	// A few follow a burst; many mean the control loop undoes what it
	// did, pass after pass.
	Unsettled int `json:"unsettled"`
}

// Point is one bucket of the series: averages over it.
type Point struct {
	At           time.Time `json:"at"`
	CostPerHour  float64   `json:"costPerHour"`
	BoundPerHour float64   `json:"boundPerHour"`
	Pending      float64   `json:"pending"`
	Machines     float64   `json:"machines"`
}

func percentiles(waits []time.Duration) Percentiles {
	if len(waits) == 0 {
		return Percentiles{}
	}
	s := slices.Clone(waits)
	slices.Sort(s)
	at := func(q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))] }
	var total time.Duration
	for _, w := range s {
		total += w
	}
	return Percentiles{Count: len(s), P50: at(0.5), P99: at(0.99), Max: s[len(s)-1], ReplicaHours: total.Hours()}
}
