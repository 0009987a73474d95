package api

// NewMachine is a machine a capacity plan adds.
type NewMachine struct {
	Key          string   `json:"key"`
	Cluster      string   `json:"cluster"`
	Group        string   `json:"group"`
	InstanceType string   `json:"instanceType"`
	Zone         string   `json:"zone"`
	CapacityType string   `json:"capacityType"`
	PricePerHour float64  `json:"pricePerHour"`
	Reason       string   `json:"reason"`
	Replicas     []string `json:"replicas"`
}

// MachineRemoval is a machine a capacity plan drains and removes.
type MachineRemoval struct {
	MachineID    string  `json:"machine"`
	Cluster      string  `json:"cluster"`
	Group        string  `json:"group"`
	PricePerHour float64 `json:"pricePerHour"`
	Reason       string  `json:"reason"`
	// ReplacedBy names the new machine that takes its replicas, if any.
	ReplacedBy string `json:"replacedBy,omitempty"`
	// Stop: the machine is stopped into the warm pool, not terminated.
	Stop bool `json:"stop,omitempty"`
}

// ReplicaPlacement is where the plan puts a pending replica.
type ReplicaPlacement struct {
	Replica string `json:"replica"`
	// Machine is an existing machine's id or a new machine's key.
	Machine string `json:"machine"`
	GPUs    []int  `json:"gpus,omitempty"`
	TEE     bool   `json:"tee,omitempty"`
	Note    string `json:"note,omitempty"`
}

// PendingReplica is a replica the plan cannot place.
type PendingReplica struct {
	Replica string `json:"replica"`
	Reason  string `json:"reason"`
}

// CapacityPlan is what the fleet should do, and what it costs (the
// planner's answer, and `gantry plan`'s).
type CapacityPlan struct {
	Add        []NewMachine       `json:"add"`
	Remove     []MachineRemoval   `json:"remove"`
	Placements []ReplicaPlacement `json:"placements"`
	Pending    []PendingReplica   `json:"pending"`
	// Desired machine count per group key (cluster/group).
	Desired map[string]int `json:"desired"`
	// CostBefore and CostAfter are $/hour of the live machines before and
	// after the plan.
	CostBefore float64 `json:"costBeforePerHour"`
	CostAfter  float64 `json:"costAfterPerHour"`
	// NewCapacityCost is the $/hour of added machines that hold replicas;
	// LowerBound is the LP relaxation's $/hour for the same demand over the
	// allowed instance types; Gap = NewCapacityCost/LowerBound − 1.
	NewCapacityCost float64 `json:"newCapacityCostPerHour"`
	LowerBound      float64 `json:"lowerBoundPerHour"`
	Gap             float64 `json:"gap"`
}

// Allocatable is what a machine of hardware offers its replicas once
// reserved is set aside (never below zero; its GPUs are all offered).
func Allocatable(hardware, reserved Resources) Resources {
	a := hardware.Sub(reserved)
	a.MilliCPU = max(a.MilliCPU, 0)
	a.MemoryBytes = max(a.MemoryBytes, 0)
	a.EphemeralBytes = max(a.EphemeralBytes, 0)
	a.GPUs = hardware.GPUs
	return a
}
