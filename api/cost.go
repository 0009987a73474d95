package api

import "time"

// CostReport is what the fleet costs now, by cluster and group, beside
// what a plan of the same services onto empty clusters would cost and the
// lower bound no plan can beat.
type CostReport struct {
	PerHour  float64       `json:"perHour"`
	Clusters []ClusterCost `json:"clusters"`
	// PlanPerHour is the planner's answer from scratch; LowerBoundPerHour
	// its LP relaxation's bound.
	PlanPerHour       float64 `json:"planPerHour"`
	LowerBoundPerHour float64 `json:"lowerBoundPerHour"`
	// Gap is PerHour/LowerBoundPerHour − 1 (the fleet now), PlanGap
	// PlanPerHour/LowerBoundPerHour − 1; both 0 without a bound.
	Gap     float64 `json:"gap"`
	PlanGap float64 `json:"planGap"`
	// PlannedAt is when the plan from scratch was computed (it is kept
	// for a while: planning a large fleet takes time).
	PlannedAt time.Time `json:"plannedAt"`
	// Services is what each service's replicas hold of the fleet's $/hour,
	// most first, and IdlePerHour what no replica holds (as of
	// PlannedAt). A replica holds its machine's price in proportion to its
	// requests of the machine's allocatable CPU and memory, the two
	// weighted alike (OpenCost's allocation, without usage).
	Services    []ServiceCost `json:"services"`
	IdlePerHour float64       `json:"idlePerHour"`
}

// ServiceCost is the $/hour a service's replicas hold on live machines.
type ServiceCost struct {
	Service  string  `json:"service"`
	Cluster  string  `json:"cluster"`
	Replicas int     `json:"replicas"`
	PerHour  float64 `json:"perHour"`
}

// ClusterCost is one cluster's live machines' $/hour.
type ClusterCost struct {
	Name    string      `json:"name"`
	PerHour float64     `json:"perHour"`
	Groups  []GroupCost `json:"groups"`
}

// GroupCost is one capacity group's live machines and their $/hour.
type GroupCost struct {
	Group    string  `json:"group"`
	Machines int     `json:"machines"`
	PerHour  float64 `json:"perHour"`
}
