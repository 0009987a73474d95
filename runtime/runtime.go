// Package runtime is the interface between the agent and what actually runs
// a replica: a Driver starts Tasks; the agent supervises them (restarts,
// health checks), whatever the driver.
package runtime

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"sort"
	"strconv"
	"strings"
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
	// HostPorts maps each port name to a free host port the agent chose.
	// Drivers that let their engine pick ports report theirs through
	// Task.HostPorts instead.
	HostPorts     map[string]int
	ContainerPort map[string]int
	// MainPort is the port PORT names: the first the spec declares.
	MainPort       string
	StopTimeout    time.Duration
	MilliCPU       int64
	MemoryBytes    int64
	EphemeralBytes int64
	// GPUDeviceIDs are the machine's GPUs given to this replica (UUIDs, or
	// indexes when the UUID is unknown).
	GPUDeviceIDs []string
	// RuntimeClass is RuntimeClassTEE when the replica must run sandboxed.
	RuntimeClass string
	// SecretFiles are secret values (by environment name) the replica
	// reads as files in SecretDir, each named in its environment as
	// <NAME>_FILE. Only drivers that are SecretFilers get them.
	SecretFiles map[string]string
	// Address is the replica's own address in its machine's /24 (overlay
	// clusters), "" otherwise. A driver that is an AddressGiver puts the
	// task in a network namespace of its own at that address; others leave
	// it to the agent, which puts it on the machine's overlay interface.
	Address string
	// DNS is where a container that is not on its machine's bridge
	// reaches the machine's resolver (host:port, port 53; "" for none).
	DNS string
}

// AddressGiver is a driver whose tasks each get a network namespace of
// their own at Spec.Address (containers on the machine's bridge), where
// they listen on their container ports.
type AddressGiver interface {
	GivesAddresses() bool
}

// NetworkAttacher puts a task's network namespace on the machine's /24:
// what a driver that gives addresses calls once the task runs.
type NetworkAttacher interface {
	// Gateway is the machine's address on that /24: the tasks' route out
	// and their resolver.
	Gateway(addr netip.Addr) netip.Addr
	// Attach gives process pid's network namespace the address addr.
	Attach(pid int, addr netip.Addr) error
}

// SecretDir is where a replica finds its secret files.
const SecretDir = "/run/gantry/secrets"

// SecretFiler is a driver that gives secret values to its tasks as files
// rather than in their environment, where its engine would show them
// (`docker inspect`).
type SecretFiler interface {
	SecretFiles() bool
}

// RuntimeClassTEE asks for the engine's TEE (sandbox) runtime.
const RuntimeClassTEE = "tee"

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
	// Stop asks the task to exit, kills it after timeout, and releases what
	// it held (a container is removed).
	Stop(ctx context.Context, timeout time.Duration) error
	// HostPorts are the host ports the task publishes, by port name.
	HostPorts() map[string]int
	// Endpoint is the host:port the agent dials to probe a named port.
	Endpoint(port string) (string, bool)
	// Exec runs a command where the task runs (inside its container) and
	// returns an error unless it exits 0.
	Exec(ctx context.Context, command []string) error
}

// Adopted is a task found still running from an earlier agent.
type Adopted struct {
	ReplicaID string
	SpecHash  string
	Task      Task
}

// Adopter is a driver whose tasks outlive the agent (containers); a
// restarted agent finds them again instead of starting duplicates.
type Adopter interface {
	Adopt(ctx context.Context, machineID string) ([]Adopted, error)
}

// LogOptions select what Logs returns.
type LogOptions struct {
	Follow bool
	// Tail is how many lines from the end; < 0 means all.
	Tail int
	// Previous reads the output of the replica's last instance that
	// ended (before its latest start), as kubectl logs --previous.
	Previous bool
}

// DefaultPreviousLogBytes bounds what drivers keep of an ended instance's
// output: its last bytes.
const DefaultPreviousLogBytes = 1 << 20

// NoPreviousError says a replica has no ended instance to show.
func NoPreviousError(replicaID string) error {
	return fmt.Errorf("replica %s has no previous instance on this machine (it has not restarted here)", replicaID)
}

// LogReader is a driver that can stream a replica's output.
type LogReader interface {
	Logs(ctx context.Context, machineID, replicaID string, opts LogOptions) (io.ReadCloser, error)
}

// ExecStreams are an interactive command's standard streams.
type ExecStreams struct {
	// Stdin is nil when the command gets none.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// TTY runs the command on a terminal (its output all on Stdout);
	// Resize carries the terminal's new sizes.
	TTY    bool
	Resize <-chan TermSize
}

// TermSize is a terminal's size in characters.
type TermSize struct{ Cols, Rows uint16 }

// StreamExecer is a task that runs a command where it runs with the
// caller's streams attached (gantry exec), and returns its exit status.
type StreamExecer interface {
	ExecStream(ctx context.Context, command []string, s ExecStreams) (exitCode int, err error)
}

// Sample is what a task has used: its CPU time so far and its memory
// now.
type Sample struct {
	CPU         time.Duration
	MemoryBytes int64
}

// Measurer is a task that says what it uses (gantry top).
type Measurer interface {
	Measure(ctx context.Context) (Sample, error)
}

// RuntimeLister is a driver that reports the runtimes it offers, TEE
// sandboxes included ("docker", "kata-runtime", "runsc").
type RuntimeLister interface {
	Runtimes(ctx context.Context) ([]string, error)
}

// IsTEE tells whether a runtime name is a TEE sandbox (Kata Containers,
// gVisor).
func IsTEE(name string) bool {
	return len(name) >= 4 && name[:4] == "kata" || name == "runsc" || name == "gvisor"
}

// PortEnv is the ports' environment: GANTRY_PORT_<NAME> for each, and
// PORT for the main one (the first declared; by name when none is said).
// ports are the host or container ports, as the driver passes them.
func PortEnv(s Spec, ports map[string]int) map[string]string {
	env := map[string]string{}
	names := make([]string, 0, len(ports))
	for name := range ports {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		env["GANTRY_PORT_"+PortEnvName(name)] = strconv.Itoa(ports[name])
	}
	if _, ok := ports[s.MainPort]; ok {
		env["PORT"] = strconv.Itoa(ports[s.MainPort])
	} else if len(names) > 0 {
		env["PORT"] = strconv.Itoa(ports[names[0]])
	}
	return env
}

// PortEnvName turns a port name into its variable suffix: "http-admin" →
// "HTTP_ADMIN".
func PortEnvName(name string) string {
	return strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}
