package api

import "time"

// Inventory is what an agent reports about its machine.
type Inventory struct {
	Capacity  Resources         `json:"capacity"`
	GPUs      []GPUDevice       `json:"gpus,omitempty"`
	Runtimes  []string          `json:"runtimes"`
	Labels    map[string]string `json:"labels,omitempty"`
	Zone      string            `json:"zone,omitempty"`
	Addresses []string          `json:"addresses,omitempty"`
	Hostname  string            `json:"hostname,omitempty"`
	Version   string            `json:"version,omitempty"`
	// TemplateVersion is the cluster's agent.version the machine was
	// launched with (its agent is told it at boot).
	TemplateVersion string `json:"templateVersion,omitempty"`
	// InstanceID is the provider's id of this machine as the agent sees
	// it (its launch arguments, the container id, cloud metadata).
	InstanceID string `json:"instanceId,omitempty"`
	// DNSAddress is where the agent answers its cluster's names
	// (host:port).
	DNSAddress string `json:"dnsAddress,omitempty"`
	// Conditions are the agent's own (the machine's are replaced by them).
	Conditions []Condition `json:"conditions,omitempty"`
	// MeshKey and MeshEndpoint: the machine's overlay public key and
	// WireGuard endpoint (overlay clusters).
	MeshKey      string `json:"meshKey,omitempty"`
	MeshEndpoint string `json:"meshEndpoint,omitempty"`
}

// JoinRequest is sent once by a new agent, with its join token.
type JoinRequest struct {
	Token     string    `json:"token"`
	Cluster   string    `json:"cluster"`
	MachineID string    `json:"machineId,omitempty"`
	Inventory Inventory `json:"inventory"`
}

// JoinResponse carries the machine credential. It is the only response that
// contains a secret, and it is sent to that machine alone.
type JoinResponse struct {
	MachineID         string `json:"machineId"`
	Credential        string `json:"credential"`
	HeartbeatInterval string `json:"heartbeatInterval"`
	// Monitoring is where the agent exports its logs and metrics, with the
	// header values resolved from their secrets (sent to this machine
	// alone, like the credential).
	Monitoring *AgentMonitoring `json:"monitoring,omitempty"`
	// Servers are the URLs of the servers the agent may call, in the
	// order to try them (several servers share one PostgreSQL store).
	Servers []string `json:"servers,omitempty"`
}

// AgentMonitoring is a machine's OTLP export configuration.
type AgentMonitoring struct {
	LogsEndpoint    string            `json:"logsEndpoint,omitempty"`
	MetricsEndpoint string            `json:"metricsEndpoint,omitempty"`
	Headers         map[string]string `json:"headers,omitempty"`
}

// HeartbeatRequest reports the agent's replicas; the answer carries the
// machine's assignments, so one round trip keeps both sides current.
type HeartbeatRequest struct {
	Replicas  []ReplicaStatus `json:"replicas"`
	Inventory *Inventory      `json:"inventory,omitempty"`
	// Sequence grows with every heartbeat of a machine (its send time in
	// nanoseconds): a heartbeat a server holds and applies late (it was
	// paused, or slow) must not undo a newer one applied by another.
	Sequence int64 `json:"sequence,omitempty"`
	// Usage is what each running replica uses now, by replica (kept by
	// the server in memory for gantry top; never stored).
	Usage map[string]Usage `json:"usage,omitempty"`
}

// Usage is CPU and memory in use.
type Usage struct {
	MilliCPU    int64 `json:"milliCpu"`
	MemoryBytes int64 `json:"memoryBytes"`
}

// ReplicaStatus is an agent's view of one replica.
type ReplicaStatus struct {
	ReplicaID string `json:"replicaId"`
	// Incarnation is the assignment's, echoed.
	Incarnation string         `json:"incarnation,omitempty"`
	SpecHash    string         `json:"specHash"`
	State       ReplicaState   `json:"state"`
	Health      Health         `json:"health,omitempty"`
	Message     string         `json:"message,omitempty"`
	Restarts    int            `json:"restarts"`
	HostPorts   map[string]int `json:"hostPorts,omitempty"`
	// Node is the Kubernetes node a Pod runs on (pod watches only).
	Node string `json:"node,omitempty"`
	// Member is a failover member's own report.
	Member *MemberStatus `json:"member,omitempty"`
}

// HeartbeatResponse tells the agent what to run and when to call again.
type HeartbeatResponse struct {
	Assignments       []Assignment `json:"assignments"`
	HeartbeatInterval string       `json:"heartbeatInterval"`
	// Servers, as in JoinResponse: agents learn a changed list here.
	Servers []string `json:"servers,omitempty"`
}

// Assignment is a replica the machine must run, with everything needed to
// run it.
type Assignment struct {
	ReplicaID string `json:"replicaId"`
	// Incarnation is the replica's (its status reports echo it).
	Incarnation string      `json:"incarnation,omitempty"`
	Service     string      `json:"service"`
	SpecHash    string      `json:"specHash"`
	Spec        ServiceSpec `json:"spec"`
	// SecretEnv are the values of Spec.SecretEnv, for this machine only.
	SecretEnv map[string]string `json:"secretEnv,omitempty"`
	Requests  Resources         `json:"requests"`
	// GPUs are the machine's devices given to this replica, exactly.
	GPUs []GPUDevice `json:"gpus,omitempty"`
	// RuntimeClass is "tee" when the replica must run on the machine's TEE
	// runtime.
	RuntimeClass string `json:"runtimeClass,omitempty"`
	// Failover is the role of a failover group's member.
	Failover *FailoverAssignment `json:"failover,omitempty"`
	// Address is the replica's own address on an overlay machine (from
	// the machine's /24), which the agent puts on the overlay interface.
	Address string `json:"address,omitempty"`
}

// DrainRequest asks for a machine to be drained and removed.
type DrainRequest struct {
	// Deadline is a duration ("10m"): then the machine is terminated even
	// if some replicas could not move.
	Deadline string `json:"deadline,omitempty"`
}

// JoinTokenRequest asks the server for a join token (admin only), for a
// machine Gantry did not launch itself.
type JoinTokenRequest struct {
	Cluster string `json:"cluster"`
	Group   string `json:"group"`
	TTL     string `json:"ttl,omitempty"`
	// Reusable is how many machines the token may join: 0 or 1, one
	// (the default, as kubeadm's tokens are for one use unless told);
	// -1 no limit until it expires.
	Reusable int `json:"reusable,omitempty"`
}

// JoinTokenResponse returns a join token.
type JoinTokenResponse struct {
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expiresAt"`
	// CACertHash pins the server's CA (the token carries it too).
	CACertHash string `json:"caCertHash,omitempty"`
}

// ApplyResult tells what an apply changed, per resource.
type ApplyResult struct {
	Results []ApplyItem `json:"results"`
}

// ApplyItem is the outcome for one resource.
type ApplyItem struct {
	Kind    string   `json:"kind"`
	Name    string   `json:"name"`
	Action  string   `json:"action"`
	Changes []string `json:"changes,omitempty"`
}

// Apply actions.
const (
	ActionCreated    = "created"
	ActionConfigured = "configured"
	ActionUnchanged  = "unchanged"
)

// ErrorBody is every error the API returns.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail names what was wrong.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

// LogRequest asks an agent to send a replica's output to the server, which
// relays it to whoever runs `gantry logs`. The agent polls for these, so
// the server never dials machines.
type LogRequest struct {
	ID        string `json:"id"`
	ReplicaID string `json:"replicaId"`
	// Kind is what is asked: "" for the replica's output; StreamExec or
	// StreamForward for a stream the agent opens back to the server
	// (GET /v1/machines/{id}/streams/{ID}, a WebSocket).
	Kind string `json:"kind,omitempty"`
	// Command, TTY and Stdin are an exec's.
	Command []string `json:"command,omitempty"`
	TTY     bool     `json:"tty,omitempty"`
	Stdin   bool     `json:"stdin,omitempty"`
	// Port is the port (a name of the replica's ports, or a number) a
	// port-forward reaches.
	Port   string `json:"port,omitempty"`
	Follow bool   `json:"follow,omitempty"`
	// Tail is the number of lines from the end; -1 for all.
	Tail int `json:"tail"`
	// Previous asks for the output of the replica's instance before its
	// latest start.
	Previous bool `json:"previous,omitempty"`
}

// AssignmentsWait answers an agent's poll for a change of its
// assignments.
type AssignmentsWait struct {
	// Revision is what the next poll names as since.
	Revision int64 `json:"revision,string"`
	// Changed: the machine's assignments may have changed; the agent
	// heartbeats for them.
	Changed bool `json:"changed"`
}

// Streams an agent opens back to its server for a user's request.
const (
	StreamExec    = "exec"
	StreamForward = "forward"
)

// An exec's WebSocket carries binary messages whose first byte names the
// channel, as Kubernetes' channel.k8s.io protocol does; a port-forward's
// carries the connection's bytes as they are.
const (
	ChannelStdin  byte = 0
	ChannelStdout byte = 1
	ChannelStderr byte = 2
	// ChannelStatus carries an ExecStatus (JSON), last.
	ChannelStatus byte = 3
	// ChannelResize carries a TerminalSize (JSON).
	ChannelResize byte = 4
	// ChannelStdinClosed says the caller's stdin ended.
	ChannelStdinClosed byte = 5
)

// ExecStatus is how an exec ended.
type ExecStatus struct {
	ExitCode int    `json:"exitCode"`
	Error    string `json:"error,omitempty"`
}

// TerminalSize is a terminal's size in characters.
type TerminalSize struct {
	Cols uint16 `json:"cols"`
	Rows uint16 `json:"rows"`
}

// MachineUsage is what a machine's replicas use, as its last heartbeat
// said.
type MachineUsage struct {
	Machine string    `json:"machine"`
	At      time.Time `json:"at"`
	// Usage is the sum of its replicas'.
	Usage    Usage            `json:"usage"`
	Replicas map[string]Usage `json:"replicas"`
}

// UsageReport is what GET /v1/usage answers: every machine that reported
// within a minute; Unreached names servers that did not answer (their
// machines are missing).
type UsageReport struct {
	Machines  []MachineUsage `json:"machines"`
	Unreached []string       `json:"unreached,omitempty"`
}
