// Package provisioner is Gantry's provider-neutral machine interface. A
// provider launches, stops, starts, describes, lists and terminates
// instances; every call is non-blocking (Launch returns while the instance is
// still pending) and states are normalized. Third parties implement
// Provisioner to add a cloud.
package provisioner

import (
	"context"
	"time"

	"github.com/gantry-dev/gantry/api"
)

// Provisioner is implemented by every provider: what the control plane
// calls. What not every provider can do is an optional interface
// (Stopper, ConsoleReader).
type Provisioner interface {
	// Name is the provider's name as written in a cluster spec.
	Name() string
	// Launch starts an instance and returns while it is still pending. A
	// retried Launch with the same IdempotencyKey returns the same instance.
	Launch(ctx context.Context, spec LaunchSpec) (*Instance, error)
	// Terminate is idempotent; terminating an unknown id is not an error.
	Terminate(ctx context.Context, id string) error
	// Describe returns ErrNotFound (wrapped) for an unknown id.
	Describe(ctx context.Context, id string) (*Instance, error)
	// List returns instances whose tags include every filter tag, in the
	// filter's states (all but terminated when States is empty).
	List(ctx context.Context, filter Filter) ([]Instance, error)
	// InstanceTypes is the catalog this provider can launch.
	InstanceTypes() []InstanceType
}

// Stopper is a provider whose instances can be stopped and started again
// (a warm pool of stopped machines).
type Stopper interface {
	// Stop keeps the instance for a later Start.
	Stop(ctx context.Context, id string) error
	// Start resumes a stopped instance; its addresses may change, and the
	// returned instance has the new ones.
	Start(ctx context.Context, id string) (*Instance, error)
}

// State is a normalized instance state.
type State string

// Normalized states; each provider maps its own onto these.
const (
	StatePending     State = "pending"
	StateRunning     State = "running"
	StateStopping    State = "stopping"
	StateStopped     State = "stopped"
	StateTerminating State = "terminating"
	StateTerminated  State = "terminated"
)

// Tags Gantry puts on every instance it launches.
const (
	TagManagedBy = "gantry.dev/managed-by"
	TagCluster   = "gantry.dev/cluster"
	TagGroup     = "gantry.dev/group"
	TagLaunchKey = "gantry.dev/launch-key"
	TagMachine   = "gantry.dev/machine"
	// TagInstallation tells apart Gantry servers sharing one account.
	TagInstallation = "gantry.dev/installation"
	// ManagedByValue is the value of TagManagedBy.
	ManagedByValue = "gantry"
	// TagRouteTable is on the instances of a cluster in network mode
	// routed, on clouds whose routes live in a route table: the table that
	// routes the machine's /24 to it (terminating it takes the route away).
	TagRouteTable = "gantry.dev/route-table"
)

// MeshPort is the UDP port of the overlay's WireGuard between a cluster's
// machines (network mode overlay).
const MeshPort = 51820

// MeshFirewaller is a provider that opens MeshPort between the machines of
// an overlay cluster (a security group or firewall rule it makes at the
// cluster's first overlay launch, unless the cluster names one of its own)
// and removes what it made once the cluster needs it no more.
type MeshFirewaller interface {
	// SweepMeshFirewalls deletes the firewalls it made for this
	// installation's clusters that are not in keep; one still in use is
	// left for the next sweep.
	SweepMeshFirewalls(ctx context.Context, installation string, keep map[string]bool) error
}

// LaunchSpec is everything a provider needs to make one instance.
type LaunchSpec struct {
	InstanceType   string
	CapacityType   string
	Zone           string
	Bootstrap      Bootstrap
	Tags           map[string]string
	IdempotencyKey string
	// Region and Config are the cluster's provider settings (spec.provider):
	// an image, subnets, security groups...
	Region string
	Config map[string]string
	// Subnet is the machine's /24 of the cluster's containerCidr: a
	// provider whose network routes (network mode routed) routes it to the
	// instance.
	Subnet string
}

// Bootstrap is what the agent on the new machine needs to join, from the
// cluster's machine template. Providers that boot real machines render it
// into user data (package cloudinit); the local and docker providers pass
// it to the agent process directly. JoinToken is a secret: providers must
// not log it or put it in tags.
type Bootstrap struct {
	// ServerURL is what the agent dials: the cluster's agent.apiUrl, or
	// the server's advertised URL.
	ServerURL string
	Cluster   string
	Group     string
	MachineID string
	JoinToken string
	// TemplateVersion is the cluster's agent.version; the agent reports it.
	TemplateVersion string
	// AgentBinaries are where a booting machine downloads the gantry
	// binary, by architecture (the cluster's agent.binaries).
	AgentBinaries map[string]api.AgentBinary
	// NetworkMode is the cluster's spec.network.mode: an overlay machine
	// needs a TUN device and the right to configure its network.
	NetworkMode string
}

// Instance is a provider's instance in normalized form.
type Instance struct {
	ID           string            `json:"id"`
	State        State             `json:"state"`
	InstanceType string            `json:"instanceType,omitempty"`
	CapacityType string            `json:"capacityType,omitempty"`
	Zone         string            `json:"zone,omitempty"`
	Addresses    []string          `json:"addresses,omitempty"`
	LaunchedAt   time.Time         `json:"launchedAt"`
	Tags         map[string]string `json:"tags,omitempty"`
}

// Filter selects instances for List.
type Filter struct {
	Tags   map[string]string
	States []State
}

// Matches reports whether an instance passes the filter.
func (f Filter) Matches(inst Instance) bool {
	for k, v := range f.Tags {
		if inst.Tags[k] != v {
			return false
		}
	}
	if len(f.States) == 0 {
		return inst.State != StateTerminated
	}
	for _, s := range f.States {
		if inst.State == s {
			return true
		}
	}
	return false
}

// InstanceType is one entry of a provider's catalog.
type InstanceType struct {
	Name           string     `json:"name"`
	MilliCPU       int64      `json:"milliCpu"`
	MemoryBytes    int64      `json:"memoryBytes"`
	EphemeralBytes int64      `json:"ephemeralStorageBytes,omitempty"`
	GPUs           []GPU      `json:"gpus,omitempty"`
	Offerings      []Offering `json:"offerings"`
}

// GPU describes the accelerators of an instance type.
type GPU struct {
	Type   string  `json:"type"`
	Count  int     `json:"count"`
	VRAMGB float64 `json:"vramGB"`
}

// Offering is where and how an instance type can be bought, and its price.
type Offering struct {
	Zone         string  `json:"zone"`
	CapacityType string  `json:"capacityType"`
	PricePerHour float64 `json:"pricePerHour"`
}

// GPUCount is the number of GPUs of the type.
func (t InstanceType) GPUCount() int {
	n := 0
	for _, g := range t.GPUs {
		n += g.Count
	}
	return n
}

// GPUDevices are the type's GPUs as an agent on a machine of it reports
// them, numbered from 0.
func (t InstanceType) GPUDevices() []api.GPUDevice {
	var devices []api.GPUDevice
	for _, g := range t.GPUs {
		for range g.Count {
			devices = append(devices, api.GPUDevice{Index: len(devices), Type: g.Type, VRAMGB: g.VRAMGB})
		}
	}
	return devices
}

// Resources is the type's hardware.
func (t InstanceType) Resources() api.Resources {
	return api.Resources{MilliCPU: t.MilliCPU, MemoryBytes: t.MemoryBytes, EphemeralBytes: t.EphemeralBytes, GPUs: t.GPUCount()}
}

// CheapestPrice is the lowest price over the type's offerings, if any.
func (t InstanceType) CheapestPrice() (float64, bool) {
	best, found := 0.0, false
	for _, o := range t.Offerings {
		if !found || o.PricePerHour < best {
			best, found = o.PricePerHour, true
		}
	}
	return best, found
}

// FindInstanceType looks a type up by name.
func FindInstanceType(catalog []InstanceType, name string) (InstanceType, bool) {
	for _, t := range catalog {
		if t.Name == name {
			return t, true
		}
	}
	return InstanceType{}, false
}

// ConsoleReader is a provider that can fetch an instance's console output
// (boot log), used to say why a machine never joined.
type ConsoleReader interface {
	ConsoleOutput(ctx context.Context, id string) (string, error)
}

// Catalog is the catalog half of a Provisioner for providers whose catalog
// is fixed data: embed it.
type Catalog struct {
	Types []InstanceType
}

// InstanceTypes implements Provisioner.
func (c Catalog) InstanceTypes() []InstanceType { return c.Types }

// CheckLaunch is what every launch checks first: an idempotency key, and
// an instance type of the catalog, which it returns.
func (c Catalog) CheckLaunch(spec LaunchSpec) (InstanceType, error) {
	if spec.IdempotencyKey == "" {
		return InstanceType{}, Errorf(KindInvalid, "launch", "idempotency key is required")
	}
	it, ok := FindInstanceType(c.Types, spec.InstanceType)
	if !ok {
		return InstanceType{}, Errorf(KindInvalid, "launch", "unknown instance type %q", spec.InstanceType)
	}
	return it, nil
}
