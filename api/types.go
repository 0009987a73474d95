// Package api holds Gantry's public domain types: the resources an operator
// declares (Cluster, Service) and the objects Gantry observes (Machine,
// Replica, Event). They are plain data with JSON tags in camelCase; parsing
// and validation live in package spec.
package api

import (
	"net"
	"sort"
	"strconv"
	"time"
)

// APIVersion is the only apiVersion Gantry accepts in specs (and the one it
// writes). It may be omitted in files.
const APIVersion = "gantry.dev/v1"

// Resource kinds.
const (
	KindCluster = "Cluster"
	KindService = "Service"
)

// ObjectMeta names a declared resource.
type ObjectMeta struct {
	// Name is unique per kind: lowercase letters, digits and hyphens,
	// starting with a letter.
	Name string `json:"name"`
	// Labels are key/value pairs selectors match (gantry get -l, affinity
	// rules).
	Labels map[string]string `json:"labels,omitempty"`
	// Set by the server; ignored on input.
	Generation int64 `json:"generation,omitempty" gantry:"output"`
	// ResourceVersion is the store revision of the object's last change.
	// Given on a write, the write happens only if the object is still at
	// that revision (409 otherwise).
	ResourceVersion int64      `json:"resourceVersion,omitempty,string"`
	CreatedAt       *time.Time `json:"createdAt,omitempty" gantry:"output"`
	UpdatedAt       *time.Time `json:"updatedAt,omitempty" gantry:"output"`
}

// Cluster is a pool of machines in capacity groups.
type Cluster struct {
	APIVersion string         `json:"apiVersion,omitempty"`
	Kind       string         `json:"kind"`
	Metadata   ObjectMeta     `json:"metadata"`
	Spec       ClusterSpec    `json:"spec"`
	Status     *ClusterStatus `json:"status,omitempty"`
}

// ProviderKubernetes names the target of a cluster whose replicas run
// as Pods in an existing Kubernetes cluster: Gantry provisions nothing
// there, so it is no provisioner.
const ProviderKubernetes = "kubernetes"

// Kubernetes reports whether the cluster is a Kubernetes target.
func (c *Cluster) Kubernetes() bool { return c.Spec.Provider.Name == ProviderKubernetes }

// Group is the cluster's capacity group of that id.
func (c *Cluster) Group(id string) (CapacityGroup, bool) {
	for _, g := range c.Spec.CapacityGroups {
		if g.GroupID == id {
			return g, true
		}
	}
	return CapacityGroup{}, false
}

// ClusterSpec is what the operator declares about a cluster.
type ClusterSpec struct {
	// Provider is the provisioner that launches the cluster's machines
	// (local, docker, exec, aws, gcp, azure, external) and its settings, or
	// kubernetes for an existing Kubernetes cluster.
	Provider ProviderSpec `json:"provider"`
	// CapacityGroups are the pools of machines the cluster launches, each
	// sized by the planner within its minSize and maxSize.
	CapacityGroups []CapacityGroup `json:"capacityGroups"`
	// ContainerCIDR is the range each machine's /24 comes from (default
	// 10.244.0.0/16, the next free /16 when taken); immutable once set.
	ContainerCIDR string `json:"containerCidr,omitempty"`
	// SystemReserved is what the scheduler keeps back on every machine for
	// the system (profiles are hardware totals).
	SystemReserved ResourceAmounts `json:"systemReserved,omitempty"`
	// Agent and Monitoring are the machine template: a change rolls every
	// group's machines, one replacement at a time.
	Agent      *AgentTemplate `json:"agent,omitempty"`
	Monitoring *Monitoring    `json:"monitoring,omitempty"`
	// Rollout is how a change of the machine template replaces machines.
	Rollout RolloutPolicy `json:"rollout,omitempty"`
	// Network is how replicas are reached (a template input: a change of
	// mode rolls the machines).
	Network *NetworkSpec `json:"network,omitempty"`
}

// NetworkSpec is a cluster's network.
type NetworkSpec struct {
	// Mode is host (replicas on their machine's address, host ports) or
	// overlay (machines joined by an encrypted WireGuard mesh carrying the
	// containerCidr; replicas reached at their machine's /24 address).
	Mode string `json:"mode,omitempty"`
}

// Network modes.
const (
	NetworkHost    = "host"
	NetworkOverlay = "overlay"
	NetworkRouted  = "routed"
)

// OwnAddresses: each replica of the cluster has an address of its own in
// its machine's /24 (overlay and routed modes).
func (c *Cluster) OwnAddresses() bool {
	mode := c.NetworkMode()
	return mode == NetworkOverlay || mode == NetworkRouted
}

// NetworkMode is the cluster's network mode (host when unset).
func (c *Cluster) NetworkMode() string {
	if c.Spec.Network == nil || c.Spec.Network.Mode == "" {
		return NetworkHost
	}
	return c.Spec.Network.Mode
}

// AgentTemplate is what machines boot with. Every field reaches the
// machine: the version is told to its agent (and reported back), the
// binaries are what a booting cloud machine downloads (cloud-init), and
// the API URL is what its agent dials.
type AgentTemplate struct {
	// Version is the agent version machines run (told to each agent,
	// reported back).
	Version string `json:"version,omitempty"`
	// Binaries by architecture (amd64, arm64), for providers whose
	// machines download the agent.
	Binaries map[string]AgentBinary `json:"binaries,omitempty"`
	// APIURL is where the machines' agents reach the server (default: the
	// server's advertised URL).
	APIURL string `json:"apiUrl,omitempty"`
}

// AgentBinary is where one architecture's gantry binary is downloaded
// from, and its SHA-256.
type AgentBinary struct {
	// URL is where a booting machine downloads the gantry binary (https).
	URL string `json:"url"`
	// SHA256 is the binary's checksum, verified before it runs.
	SHA256 string `json:"sha256"`
}

// Monitoring is where machines send logs and metrics.
type Monitoring struct {
	// OTLPLogsEndpoint receives the agents' and replicas' logs over
	// OTLP/HTTP.
	OTLPLogsEndpoint string `json:"otlpLogsEndpoint,omitempty"`
	// OTLPMetricsEndpoint receives the agents' metrics over OTLP/HTTP.
	OTLPMetricsEndpoint string `json:"otlpMetricsEndpoint,omitempty"`
	// Headers are sent with every export (authentication); their values come
	// from Secrets.
	Headers []SecretHeader `json:"headers,omitempty"`
}

// SecretHeader is a header whose value is a secret the server reads from
// its own environment or a file; only the value's SHA-256 is stored, so a
// rotated secret is still a template change.
type SecretHeader struct {
	// Name is the HTTP header's name.
	Name string `json:"name"`
	// SecretRef is where the header's value is kept.
	SecretRef SecretRef `json:"secretRef"`
	// ValueSHA256 is set by the server on apply.
	ValueSHA256 string `json:"valueSha256,omitempty" gantry:"output"`
}

// SecretRef names where a secret lives on the server: an environment
// variable or a file of the server, or (monitoring headers) a key of a
// Secret.
type SecretRef struct {
	// Env names an environment variable of the server holding the value.
	Env string `json:"env,omitempty"`
	// File names a file of the server holding the value.
	File string `json:"file,omitempty"`
	// Name is the Secret holding the value (with key).
	Name string `json:"name,omitempty"`
	// Key is the Secret's key holding the value.
	Key string `json:"key,omitempty"`
}

// RolloutPolicy bounds template rollouts.
type RolloutPolicy struct {
	// MaxSurge is how many replacement machines may be in flight (default 1).
	MaxSurge int `json:"maxSurge,omitempty"`
}

// ProviderSpec selects the provisioner of a cluster. Credentials never go
// here: they come from the environment of the server.
type ProviderSpec struct {
	// Name is the provider: local, docker, exec, aws, gcp, azure, external
	// or kubernetes.
	Name string `json:"name"`
	// Region is the cloud region machines are launched in (cloud providers).
	Region string `json:"region,omitempty"`
	// Config holds the provider's own settings (names of credentials, never
	// their values); gantry explain does not list them: see
	// docs/providers.md.
	Config map[string]string `json:"config,omitempty"`
}

// CapacityGroup is a set of machines of one shape.
type CapacityGroup struct {
	// GroupID names the group within its cluster: lowercase letters, digits
	// and hyphens.
	GroupID string `json:"groupId"`
	// InstanceType is the catalog type every machine of the group is;
	// immutable. Without it, a profile selects the cheapest type that
	// satisfies it, and a group with neither may use any type its
	// instanceTypes filter allows.
	InstanceType string `json:"instanceType,omitempty"`
	// Profile is the machine shape the group needs (cpu, memory, ephemeral
	// storage, GPUs): the cheapest catalog type that satisfies it is chosen.
	Profile *MachineProfile `json:"profile,omitempty"`
	// MinSize is the fewest machines the group keeps (0: scale to zero).
	MinSize int `json:"minSize"`
	// MaxSize is the most machines the group may run or launch at once.
	MaxSize int `json:"maxSize"`
	// CapacityType is onDemand, spot, or any (the cheaper of the two,
	// on-demand when spot runs out).
	CapacityType string `json:"capacityType,omitempty"`
	// Zones limit where machines are launched; empty: any zone of the
	// region.
	Zones []string `json:"zones,omitempty"`
	// Labels are given to every machine of the group (placement.nodeSelector
	// matches them).
	Labels map[string]string `json:"labels,omitempty"`
	// WarmPool is how many launched machines wait, stopped or running, to
	// join at once when demand comes.
	WarmPool int `json:"warmPool,omitempty"`
	// WarmPoolState is running (idle machines kept running) or stopped
	// (kept stopped, started again on scale-up before any launch).
	WarmPoolState string `json:"warmPoolState,omitempty"`
	// Role "edge": the group's machines serve the cluster's exposed
	// ports (when no group of a cluster is edge, every machine does).
	Role string `json:"role,omitempty"`
}

// RoleEdge is the role of a capacity group whose machines serve the
// cluster's exposed ports.
const RoleEdge = "edge"

// Warm pool states.
const (
	WarmRunning = "running"
	WarmStopped = "stopped"
)

// MachineProfile is the hardware total of a machine (not what is allocatable).
type MachineProfile struct {
	// CPU is a decimal number of cores, such as "4" or "0.5".
	CPU string `json:"cpu"`
	// MemoryBytes is the machine's memory in bytes.
	MemoryBytes int64 `json:"memoryBytes"`
	// EphemeralStorageBytes is the machine's local disk in bytes.
	EphemeralStorageBytes int64 `json:"ephemeralStorageBytes,omitempty"`
	// GPU is the GPUs the machine has.
	GPU *GPUSpec `json:"gpu,omitempty"`
}

// GPUSpec is the GPU hardware of a machine profile.
type GPUSpec struct {
	// Type is the GPU model, as the catalog names it (a100, l4...).
	Type string `json:"type"`
	// Count is how many GPUs.
	Count int `json:"count"`
}

// Capacity types of a group.
const (
	CapacityOnDemand = "onDemand"
	CapacitySpot     = "spot"
	CapacityAny      = "any"
)

// ResourceAmounts are quantities as the operator writes them: cpu "500m" or
// "2", memory "512Mi", ephemeralStorage "10Gi".
type ResourceAmounts struct {
	// CPU in cores (2, 0.5) or millicores (500m).
	CPU string `json:"cpu,omitempty"`
	// Memory in bytes with a unit: 512Mi, 2Gi (binary) or 500M, 2G
	// (decimal); a number alone counts bytes.
	Memory string `json:"memory,omitempty"`
	// EphemeralStorage is local disk, in the units of memory.
	EphemeralStorage string `json:"ephemeralStorage,omitempty"`
}

// ClusterStatus is observed state, filled in by the server.
type ClusterStatus struct {
	Groups     []GroupStatus `json:"groups"`
	Conditions []Condition   `json:"conditions,omitempty"`
}

// Condition is a cluster-wide problem (or its absence), like Kubernetes'.
type Condition struct {
	Type               string    `json:"type"`
	Status             string    `json:"status"`
	Reason             string    `json:"reason,omitempty"`
	Message            string    `json:"message,omitempty"`
	LastTransitionTime time.Time `json:"lastTransitionTime"`
}

// Condition types.
const (
	// ConditionProviderReady is False while the provider refuses Gantry's
	// credentials (auth errors): launches wait, with backoff.
	ConditionProviderReady = "ProviderReady"
	// ConditionStoreWritable is False while the server cannot write its
	// store (disk full, read-only file system): nothing it decides or
	// hears lands.
	ConditionStoreWritable = "StoreWritable"
	// ConditionKubernetesReady is False while a Kubernetes cluster's API
	// server refuses or fails Gantry's calls: they are retried with
	// backoff.
	ConditionKubernetesReady = "KubernetesReady"
	// ConditionIngressReady is False while an edge machine's agent cannot
	// serve the cluster's exposed ports (no HAProxy, a port taken, a
	// configuration refused), with why.
	ConditionIngressReady = "IngressReady"
	// ConditionNetworkReady is False while an overlay cluster's machine
	// cannot join the mesh (no TUN device, no permission), with why.
	ConditionNetworkReady = "NetworkReady"
)

// GroupStatus reports a capacity group's machine counts.
type GroupStatus struct {
	GroupID string `json:"groupId"`
	Desired int    `json:"desired"`
	Current int    `json:"current"`
	Joined  int    `json:"joined"`
	// Updated machines run the current template; fewer than Current means
	// a rollout is in progress.
	Updated      int    `json:"updated"`
	TemplateHash string `json:"templateHash"`
}

// Service is a long-running workload.
type Service struct {
	APIVersion string         `json:"apiVersion,omitempty"`
	Kind       string         `json:"kind"`
	Metadata   ObjectMeta     `json:"metadata"`
	Spec       ServiceSpec    `json:"spec"`
	Status     *ServiceStatus `json:"status,omitempty"`
}

// ServiceSpec is what the operator declares about a service.
type ServiceSpec struct {
	// Cluster is where the service runs.
	Cluster string `json:"cluster"`
	// Image is the container image replicas run (docker runtime); set image
	// or command.
	Image string `json:"image,omitempty"`
	// Command is what replicas run: the image's entrypoint replaced, or,
	// without an image, a process on the machine (process runtime).
	Command []string `json:"command,omitempty"`
	// Args are given to the command (or the image's entrypoint).
	Args []string `json:"args,omitempty"`
	// Env are the replicas' environment variables. In spec files, a list of
	// {name, value} or {name, secretRef: {name, key}} entries, or a map of
	// names to values.
	Env map[string]string `json:"env,omitempty"`
	// SecretEnv are environment variables whose values are keys of
	// Secrets (in spec files: env entries with a secretRef).
	SecretEnv map[string]SecretKeyRef `json:"secretEnv,omitempty" gantry:"output"`
	// WorkingDir is the directory the command starts in.
	WorkingDir string `json:"workingDir,omitempty"`
	// Ports are the named ports replicas listen on; each is in
	// $GANTRY_PORT_<NAME>, and the first also in $PORT.
	Ports []Port `json:"ports,omitempty"`
	// Replicas is how many copies run (default 1; 0 stops them all).
	Replicas *int `json:"replicas,omitempty"`
	// Resources are what one replica needs; the scheduler never places more
	// on a machine than it can give.
	Resources ServiceResources `json:"resources,omitempty"`
	// HealthCheck tells when a replica serves: it is in the service's name,
	// and a deployment goes on, only once it passes.
	HealthCheck *HealthCheck `json:"healthCheck,omitempty"`
	// Isolation is any (default), teeRequired (only machines with a TEE
	// runtime such as kata; the replica waits otherwise), teePreferred or
	// standardRequired.
	Isolation string `json:"isolation,omitempty"`
	// Placement constrains which machines replicas may run on.
	Placement Placement `json:"placement,omitempty"`
	// StopTimeoutSeconds is how long a replica has to stop after SIGTERM
	// before SIGKILL.
	StopTimeoutSeconds int `json:"stopTimeoutSeconds,omitempty"`
	// Update is how a new revision replaces the old one.
	Update UpdatePolicy `json:"update,omitempty"`
	// Expose publishes the service's serving replicas on its cluster's
	// edge machines, through the agents' HAProxy (not a revision: no
	// replica changes when it does).
	Expose []Expose `json:"expose,omitempty"`
	// RestartedAt is set by `gantry rollout restart`: a new revision that
	// runs the same thing.
	RestartedAt string `json:"restartedAt,omitempty" gantry:"output"`
	// Failover is set on the services a FailoverGroup expands into.
	Failover *FailoverMemberSpec `json:"failover,omitempty" gantry:"output"`
}

// DesiredReplicas is the replica count with its default of 1.
func (s ServiceSpec) DesiredReplicas() int {
	if s.Replicas == nil {
		return 1
	}
	return *s.Replicas
}

// Port is a named port the workload listens on.
type Port struct {
	// Name names the port (lowercase), for health checks, the ingress and
	// DNS SRV answers.
	Name string `json:"name"`
	// ContainerPort is where the container listens (required with an image;
	// process replicas get a free host port in $PORT).
	ContainerPort int `json:"containerPort,omitempty"`
	// Protocol is tcp (default) or udp.
	Protocol string `json:"protocol,omitempty"`
}

// ServiceResources is what one replica needs.
type ServiceResources struct {
	// CPU per replica, in cores (2, 0.5) or millicores (500m).
	CPU string `json:"cpu,omitempty"`
	// Memory per replica with a unit: 512Mi, 2Gi, 500M; a number alone
	// counts bytes.
	Memory string `json:"memory,omitempty"`
	// EphemeralStorage per replica, in the units of memory.
	EphemeralStorage string `json:"ephemeralStorage,omitempty"`
	// GPU asks for GPUs per replica, required or preferred.
	GPU *GPURequirement `json:"gpu,omitempty"`
}

// GPURequirement asks for GPUs per replica.
type GPURequirement struct {
	// Count is how many GPUs each replica needs.
	Count int `json:"count"`
	// Type is the GPU model required (a100, l4...); empty: any.
	Type string `json:"type,omitempty"`
	// MinVRAMGB is the least memory, in GB, each GPU must have.
	MinVRAMGB float64 `json:"minVramGB,omitempty"`
	// Policy is required (only machines with enough free GPUs; the replica
	// waits and says why otherwise) or preferred (GPUs where free, else on
	// CPU).
	Policy string `json:"policy,omitempty"`
}

// GPU policies.
const (
	GPURequired  = "required"
	GPUPreferred = "preferred"
)

// Isolation policies.
const (
	IsolationAny              = "any"
	IsolationTEERequired      = "teeRequired"
	IsolationTEEPreferred     = "teePreferred"
	IsolationStandardRequired = "standardRequired"
)

// HealthCheck probes a replica. Exactly one of HTTP, TCP, Exec is set.
type HealthCheck struct {
	// HTTP passes when GET of path on the port answers 2xx or 3xx.
	HTTP *HTTPCheck `json:"http,omitempty"`
	// TCP passes when the port accepts a connection.
	TCP *TCPCheck `json:"tcp,omitempty"`
	// Exec passes when the command exits 0 (run in the replica).
	Exec *ExecCheck `json:"exec,omitempty"`
	// IntervalSeconds is the time between checks.
	IntervalSeconds int `json:"intervalSeconds,omitempty"`
	// TimeoutSeconds bounds one check.
	TimeoutSeconds int `json:"timeoutSeconds,omitempty"`
	// FailureThreshold is how many checks in a row must fail before the
	// replica counts as unhealthy.
	FailureThreshold int `json:"failureThreshold,omitempty"`
	// SuccessThreshold passes in a row make an unhealthy replica healthy
	// again (default 1).
	SuccessThreshold int `json:"successThreshold,omitempty"`
}

// HTTPCheck is healthy on a 2xx or 3xx answer.
type HTTPCheck struct {
	// Path is requested with GET (starts with /).
	Path string `json:"path,omitempty"`
	// Port names one of spec.ports.
	Port string `json:"port"`
}

// TCPCheck is healthy when the port accepts a connection.
type TCPCheck struct {
	// Port names one of spec.ports.
	Port string `json:"port"`
}

// ExecCheck is healthy when the command exits 0.
type ExecCheck struct {
	// Command runs in the replica; exit 0 passes.
	Command []string `json:"command"`
}

// Placement constrains where replicas go.
type Placement struct {
	// CapacityGroups pins replicas to these groups of the cluster.
	CapacityGroups []string `json:"capacityGroups,omitempty"`
	// NodeSelector places replicas only on machines with all these labels.
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// Spread keeps replicas balanced across zones or machines, within
	// maxSkew.
	Spread []SpreadRule `json:"spread,omitempty"`
	// SameZone keeps every replica of the service in one zone.
	SameZone bool `json:"sameZone,omitempty"`
	// Dedicated runs at most one replica of this service per machine.
	Dedicated bool `json:"dedicated,omitempty"`
	// Priority orders pending replicas (higher first); with
	// preemptLowerPriority, may evict lower ones.
	Priority int `json:"priority,omitempty"`
	// PreemptLowerPriority lets a replica that fits nowhere evict replicas
	// of lower priority (they go back to pending).
	PreemptLowerPriority bool `json:"preemptLowerPriority,omitempty"`
	// Scoring is binpack (default: fill machines) or spread (least
	// allocated machine first).
	Scoring string `json:"scoring,omitempty"`
	// Affinity draws the replicas to machines or zones that run replicas
	// matching a selector; AntiAffinity keeps them away from those.
	Affinity []AffinityTerm `json:"affinity,omitempty"`
	// AntiAffinity keeps replicas away from those of services the selector
	// matches, on a machine or in a zone.
	AntiAffinity []AffinityTerm `json:"antiAffinity,omitempty"`
}

// AffinityTerm selects replicas of any service of the cluster by their
// service's labels, within a topology (the same machine, or the same
// zone), as a requirement or a weighted preference.
type AffinityTerm struct {
	// Selector matches services by their labels (key=value, comma-
	// separated).
	Selector map[string]string `json:"selector"`
	// Topology is machine or zone.
	Topology string `json:"topology"`
	// Mode is required (default) or preferred.
	Mode string `json:"mode,omitempty"`
	// Weight ranks a preferred term (1 to 100).
	Weight int `json:"weight,omitempty"`
}

// Affinity modes.
const (
	AffinityRequired  = "required"
	AffinityPreferred = "preferred"
)

// Required reports whether the term must hold.
func (t AffinityTerm) Required() bool { return t.Mode != AffinityPreferred }

// Scoring strategies.
const (
	ScoringBinpack = "binpack"
	ScoringSpread  = "spread"
)

// SpreadRule limits how unevenly replicas spread over a topology key.
type SpreadRule struct {
	// Key is zone or machine.
	Key string `json:"key"`
	// MaxSkew is the largest difference of replica counts between two
	// domains.
	MaxSkew int `json:"maxSkew"`
}

// Spread keys.
const (
	SpreadZone    = "zone"
	SpreadMachine = "machine"
)

// ServiceStatus is observed state, filled in by the server.
type ServiceStatus struct {
	Desired int `json:"desired"`
	Running int `json:"running"`
	Pending int `json:"pending"`
	// Revision is the number of the revision being deployed (or
	// deployed), and Deployment the state of its deployment.
	Revision   int64  `json:"revision,omitempty"`
	Deployment string `json:"deployment,omitempty"`
	// Updated replicas run the revision; Available ones of them are
	// available.
	Updated   int `json:"updated"`
	Available int `json:"available"`
}

// Replica is one running copy of a service.
type Replica struct {
	ID string `json:"id"`
	// ResourceVersion is the store revision of the replica's last change.
	ResourceVersion int64  `json:"resourceVersion,omitempty,string"`
	Service         string `json:"service"`
	Cluster         string `json:"cluster"`
	Index           int    `json:"index"`
	Machine         string `json:"machine,omitempty"`
	// Incarnation tells this placement of the replica from an earlier one
	// under the same id (a replica deleted and made again, placed again
	// on the same machine): its runner echoes it, and a report of another
	// incarnation is not this replica's.
	Incarnation string `json:"incarnation,omitempty"`
	// PreviousMachine keeps running the replica while it moves off a
	// draining machine, until the copy on Machine runs.
	PreviousMachine string `json:"previousMachine,omitempty"`
	// PreviousAddress and PreviousPorts are where the copy on
	// PreviousMachine serves while the new one starts (it stays in the
	// service's endpoints until then).
	PreviousAddress string         `json:"previousAddress,omitempty"`
	PreviousPorts   map[string]int `json:"previousPorts,omitempty"`
	// HandedOverAt is when the copy on Machine began to run: the one on
	// PreviousMachine, out of the endpoints since, stops once it has
	// drained (the service's drainSeconds).
	HandedOverAt *time.Time     `json:"handedOverAt,omitempty"`
	State        ReplicaState   `json:"state"`
	Reason       string         `json:"reason,omitempty"`
	Health       Health         `json:"health,omitempty"`
	Restarts     int            `json:"restarts"`
	HostPorts    map[string]int `json:"hostPorts,omitempty"`
	Address      string         `json:"address,omitempty"`
	SpecHash     string         `json:"specHash"`
	Requests     Resources      `json:"requests"`
	// GPUIndexes are the machine's GPU devices given to this replica.
	GPUIndexes []int `json:"gpuIndexes,omitempty"`
	// RuntimeClass is "tee" when the replica runs on the machine's TEE
	// runtime (kata, gVisor), "" for the standard runtime.
	RuntimeClass string `json:"runtimeClass,omitempty"`
	// Note records a soft policy that could not be honoured (GPU or TEE
	// preferred).
	Note string `json:"note,omitempty"`
	// Pod is the replica's Pod (namespace/name) on a Kubernetes cluster,
	// set once it is placed there; Node is the node the Pod runs on.
	Pod    string            `json:"pod,omitempty"`
	Node   string            `json:"node,omitempty"`
	Labels map[string]string `json:"labels,omitempty"`
	// Member is what a failover group's member last said of itself.
	Member *MemberStatus `json:"member,omitempty"`
	// RetiringSince: the replica is being removed (RetireReason says
	// why). It is out of its service's name and keeps running until its
	// service's drain time has passed; then it is deleted and stops.
	RetiringSince *time.Time `json:"retiringSince,omitempty"`
	RetireReason  string     `json:"retireReason,omitempty"`
	UpdatedAt     time.Time  `json:"updatedAt"`
}

// ReasonUnschedulable begins a pending replica's reason when no machine
// its cluster can launch would ever hold it: only a change of its spec or
// of the cluster places it (gantry rollout status fails at once on it).
const ReasonUnschedulable = "unschedulable: "

// ReplicaState is where a replica is in its life. Package replica owns its
// transitions.
type ReplicaState string

// Replica states.
const (
	ReplicaPending  ReplicaState = "pending"
	ReplicaAssigned ReplicaState = "assigned"
	ReplicaStarting ReplicaState = "starting"
	ReplicaRunning  ReplicaState = "running"
	ReplicaCrashed  ReplicaState = "crashed"
	ReplicaFailed   ReplicaState = "failed"
	// ReplicaExited and ReplicaUnknown are Pods' only: their container
	// ran to completion (phase Succeeded), or their node stopped
	// reporting (phase Unknown).
	ReplicaExited  ReplicaState = "exited"
	ReplicaUnknown ReplicaState = "unknown"
)

// Health is a replica's health-check verdict.
type Health string

// Health values.
const (
	HealthUnknown   Health = "unknown"
	HealthHealthy   Health = "healthy"
	HealthUnhealthy Health = "unhealthy"
)

// Event records a decision or an observation.
type Event struct {
	ID         int64     `json:"id"`
	Time       time.Time `json:"time"`
	Type       string    `json:"type"`
	Reason     string    `json:"reason"`
	ObjectKind string    `json:"objectKind"`
	ObjectName string    `json:"objectName"`
	Message    string    `json:"message"`
}

// Event types.
const (
	EventNormal  = "Normal"
	EventWarning = "Warning"
)

// NonNil is items, or an empty list for nil: API lists are [] in JSON,
// never null.
func NonNil[T any](items []T) []T {
	if items == nil {
		return []T{}
	}
	return items
}

// ServerHealth is what GET /healthz answers: whether the server's store
// answers and takes writes, whether it leads, and its build.
type ServerHealth struct {
	Status  string `json:"status"`
	Server  string `json:"server"`
	Leader  bool   `json:"leader"`
	Version string `json:"version"`
	Commit  string `json:"commit,omitempty"`
	Error   string `json:"error,omitempty"`
	Since   string `json:"since,omitempty"`
}

// URL is where a replica's "http" port answers (its first port by name
// when none is called http), "" while it has no address or no port.
func (r Replica) URL() string {
	if r.Address == "" || len(r.HostPorts) == 0 {
		return ""
	}
	port, ok := r.HostPorts["http"]
	if !ok {
		names := make([]string, 0, len(r.HostPorts))
		for n := range r.HostPorts {
			names = append(names, n)
		}
		sort.Strings(names)
		port = r.HostPorts[names[0]]
	}
	return "http://" + net.JoinHostPort(r.Address, strconv.Itoa(port))
}
