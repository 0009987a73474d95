// Package runtime is the interface between the agent and what actually runs
// a replica: a Driver starts Tasks; the agent supervises them (restarts,
// health checks), whatever the driver.
package runtime

import (
	"context"
	"time"
)

// Spec is everything a driver needs to start one replica.
type Spec struct {
	ReplicaID  string
	Service    string
	MachineID  string
	SpecHash   string
	Image      string
	Command    []string
	Args       []string
	Env        map[string]string
	WorkingDir string
	// HostPorts maps each port name to the host port the agent chose.
	HostPorts     map[string]int
	ContainerPort map[string]int
	StopTimeout   time.Duration
	MilliCPU      int64
	MemoryBytes   int64
}

// Driver runs tasks of one kind (processes, containers).
type Driver interface {
	Name() string
	Start(ctx context.Context, s Spec) (Task, error)
}

// Task is one running incarnation of a replica.
type Task interface {
	// Done is closed when the task has exited.
	Done() <-chan struct{}
	// ExitError is why it exited (nil for exit status 0), valid after Done.
	ExitError() error
	// Stop asks the task to exit, and kills it after timeout.
	Stop(ctx context.Context, timeout time.Duration) error
}
