// Package agent is `gantry agent`: it joins the cluster with a join token,
// keeps a machine credential, heartbeats with its replicas' status, and runs
// the replicas assigned to it through a runtime driver. When the server is
// unreachable it keeps its replicas running and catches up when it returns.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/gantry-dev/gantry/agent/ingress"
	"github.com/gantry-dev/gantry/agent/mesh"
	"github.com/gantry-dev/gantry/agent/names"
	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/auth"
	"github.com/gantry-dev/gantry/client"
	"github.com/gantry-dev/gantry/internal/atomicfile"
	"github.com/gantry-dev/gantry/internal/pki"
	"github.com/gantry-dev/gantry/runtime"
	"github.com/gantry-dev/gantry/telemetry"
	"k8s.io/utils/clock"
)

// Config is what `gantry agent` is told.
type Config struct {
	ServerURL  string
	Cluster    string
	Group      string
	MachineID  string
	ProviderID string
	Zone       string
	Address    string
	DataDir    string
	Labels     map[string]string
	// JoinToken is needed only until the agent holds a credential.
	JoinToken string
	// CACertHash pins the CA of an HTTPS server ("sha256:…"); by default
	// the one the join token carries, then the one kept with the
	// credential. Without a pin, HTTPS servers are verified against the
	// system's roots.
	CACertHash string
	// Capacity overrides detection where set (local machines advertise
	// their instance type's resources).
	Capacity api.Resources
	// RestartBackoff doubles per crash up to MaxRestartBackoff, and resets
	// once a replica ran StableAfter.
	RestartBackoff    time.Duration
	MaxRestartBackoff time.Duration
	StableAfter       time.Duration
	// FirstProbeDelay is when a new replica's first health probe runs.
	FirstProbeDelay time.Duration
	// RequestTimeout bounds each call to the server.
	RequestTimeout time.Duration
	// HeartbeatAttemptTimeout bounds a heartbeat's call to one server:
	// past it the next server is tried, so a server that hangs (stopped,
	// cut off without a reset) does not keep this machine's heartbeats
	// from the others until a new leader counts it lost.
	HeartbeatAttemptTimeout time.Duration
	// RetryInterval is the wait after a failed heartbeat (capped by the
	// heartbeat interval).
	RetryInterval time.Duration
	// MinReportGap rate-limits heartbeats sent early on a status change.
	MinReportGap    time.Duration
	GPUProbeTimeout time.Duration
	// LogPollTimeout bounds one poll for log requests (the server holds it
	// open until a request comes or its own wait ends); LogFlushInterval
	// is how often output is sent; LogKeepAlive how often an idle
	// followed stream checks its reader is still there.
	LogPollTimeout time.Duration
	// UsageInterval is how often the running replicas' CPU and memory are
	// measured, for gantry top (0: never).
	UsageInterval    time.Duration
	LogFlushInterval time.Duration
	LogKeepAlive     time.Duration
	// LeftoverStopTimeout is the grace of a replica found running that is
	// no longer assigned here.
	LeftoverStopTimeout time.Duration
	Version             string
	// TemplateVersion is the cluster's agent.version this machine was
	// launched with; the agent reports it.
	TemplateVersion string
	// LeaseStopAfter is the part of a failover primary's lease after the
	// last renewal sent at which the agent stops the primary if no
	// renewal was answered since; LeaseCheckInterval is how often it
	// looks, and LeaseStopTimeout how long the primary has to stop before
	// it is killed.
	LeaseStopAfter     float64
	LeaseCheckInterval time.Duration
	LeaseStopTimeout   time.Duration
	// LeaseClock is the time failover leases are counted in: when a
	// renewal was sent, when a primary must stop (tests step a fake one).
	LeaseClock clock.WithTicker
	// Telemetry tunes the OTLP export to the cluster's monitoring
	// endpoints (when it has some).
	Telemetry telemetry.AgentConfig
	// DNS is where the agent answers its cluster's names (Listen ""
	// answers none); NamesPollTimeout bounds one wait for new names (the
	// server answers sooner, when they change or its own wait ends).
	DNS              names.Config
	NamesPollTimeout time.Duration
	// Ingress is how an edge machine runs HAProxy for the cluster's
	// exposed ports (its Dir defaults to DataDir/ingress).
	Ingress ingress.Config
	// Mesh is how a machine of an overlay cluster joins its mesh (its key
	// is kept in DataDir).
	Mesh mesh.Config
	// MeshAddress is where the other machines reach this one's WireGuard
	// port: Address when empty; MeshAddressAuto (or both empty) is the
	// address this machine reaches the server from (a machine container's
	// own, whose Address is its host's; a cloud machine's).
	MeshAddress string
	// RoutedLink holds the machine's and its replicas' addresses in a
	// cluster whose network routes each machine's /24 to it.
	RoutedLink string
	// ContainerDNS is an address (port 53) where the agent also answers
	// names for replica containers that are not on its bridge (host mode),
	// which do not reach its loopback: "" for none; MeshAddressAuto is the
	// address it reaches the server from (a docker provider machine's own,
	// on the network its sibling replica containers share).
	ContainerDNS string
}

// MeshAddressAuto asks for the address the machine reaches the server from.
const MeshAddressAuto = "auto"

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		RestartBackoff: time.Second, MaxRestartBackoff: time.Minute, StableAfter: 30 * time.Second,
		FirstProbeDelay: 200 * time.Millisecond, RequestTimeout: 10 * time.Second, HeartbeatAttemptTimeout: 2 * time.Second, RetryInterval: time.Second,
		MinReportGap: 200 * time.Millisecond, GPUProbeTimeout: 10 * time.Second,
		LogPollTimeout: time.Minute, UsageInterval: 10 * time.Second, LogFlushInterval: 200 * time.Millisecond, LogKeepAlive: 5 * time.Second,
		LeftoverStopTimeout: 10 * time.Second,
		LeaseStopAfter:      0.75, LeaseCheckInterval: 100 * time.Millisecond, LeaseStopTimeout: time.Second,
		LeaseClock: clock.RealClock{},
		Telemetry:  telemetry.DefaultAgentConfig(),
		DNS:        names.DefaultConfig(), NamesPollTimeout: time.Minute,
		Ingress: ingress.DefaultConfig(""),
		Mesh:    mesh.DefaultConfig(""), RoutedLink: "lo",
	}
}

// Agent runs on one machine.
type Agent struct {
	cfg    Config
	driver runtime.Driver
	log    *slog.Logger
	client *client.Client
	// transport verifies servers against the pinned CA (nil: the
	// system's roots).
	transport http.RoundTripper
	machineID string

	mu          sync.Mutex
	supervisors map[string]*supervisor
	// usage is what the running replicas use, measured apart.
	usage *usageMeter
	// adoptable are tasks an earlier agent left running, by replica, until
	// the first assignments say which to keep.
	adoptable map[string]runtime.Adopted
	changed   chan struct{}
	// renewedAt is when the last heartbeat the server answered was sent.
	renewedAt time.Time
	// sequence is the last heartbeat's Sequence.
	sequence int64
	// roles are the failover roles last written, by group.
	roles map[string]api.FailoverAssignment
	// telemetry exports over OTLP (nil: no monitoring endpoints);
	// heartbeats counts into it.
	telemetry  *telemetry.Agent
	heartbeats metric.Int64Counter
	// containerDNS is where replica containers reach dns (host:port; "":
	// nowhere).
	containerDNS string
	// dns answers the cluster's names (nil: none); inventorySent says
	// whether this run reported its inventory (its DNS address may differ
	// from the last run's).
	dns           *names.Server
	inventorySent bool
	// routes carries the latest exposed ports this machine serves to
	// the goroutine that applies them to HAProxy (a newer replaces an
	// older one not taken yet).
	routes latest[[]api.IngressRoute]
	// network carries the latest mesh (peers, mode) to keepNetwork.
	network latest[*api.MeshConfig]
	// conditions are the agent's own (IngressReady), by type; a change
	// sets resendInventory, which the next heartbeat carries.
	conditionsMu    sync.Mutex
	conditions      map[string]api.Condition
	resendInventory atomic.Bool
	// overlay is the machine's side of its cluster's mesh (nil: none).
	overlayMu sync.Mutex
	overlay   *mesh.Mesh
	routed    *mesh.Routed
	// unmasquerade removes the rule that lets replicas reach beyond the
	// cluster (nil: none).
	unmasquerade func() error
	// meshEndpoint is the address of this machine's WireGuard port.
	meshEndpoint string
}

// New returns an agent using driver to run replicas.
func New(cfg Config, driver runtime.Driver, log *slog.Logger) *Agent {
	a := &Agent{
		cfg: cfg, driver: driver, log: log, machineID: cfg.MachineID,
		supervisors: map[string]*supervisor{}, usage: newUsageMeter(), changed: make(chan struct{}, 1), roles: map[string]api.FailoverAssignment{},
		routes: newLatest[[]api.IngressRoute](), network: newLatest[*api.MeshConfig](),
	}
	a.cfg.CACertHash = a.caPin()
	if a.cfg.CACertHash != "" {
		a.transport = pki.PinnedTransport(a.cfg.CACertHash)
	}
	a.client = client.New(cfg.ServerURL, "", &http.Client{Timeout: cfg.RequestTimeout, Transport: a.transport})
	return a
}

// caPin is the configured pin, else the join token's, else the one kept
// with the credential.
func (a *Agent) caPin() string {
	if a.cfg.CACertHash != "" {
		return a.cfg.CACertHash
	}
	if pin := auth.TokenCAPin(a.cfg.JoinToken); pin != "" {
		return pin
	}
	if cf, err := a.readCredential(); err == nil {
		return cf.CACertHash
	}
	return ""
}

// nextSequence numbers a heartbeat: its send time, and always more than
// the last one's.
func (a *Agent) nextSequence() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sequence = max(a.sequence+1, time.Now().UnixNano())
	return a.sequence
}

// leaseClock is the clock failover leases are counted in.
func (a *Agent) leaseClock() clock.WithTicker {
	if a.cfg.LeaseClock == nil {
		return clock.RealClock{}
	}
	return a.cfg.LeaseClock
}

// secretFiles: the driver gives secret values as files.
func (a *Agent) secretFiles() bool {
	f, ok := a.driver.(runtime.SecretFiler)
	return ok && f.SecretFiles()
}

// ErrMachineGone means the server terminated this machine.
var ErrMachineGone = errors.New("the server no longer knows this machine as live")

type credentialFile struct {
	MachineID  string `json:"machineId"`
	Credential string `json:"credential"`
	// Monitoring is where the agent exports its logs and metrics (with
	// secret header values: the file is 0600, like the credential).
	Monitoring *api.AgentMonitoring `json:"monitoring,omitempty"`
	// Servers are the server URLs last learned, tried in turn.
	Servers []string `json:"servers,omitempty"`
	// CACertHash is the pin the servers were verified with.
	CACertHash string `json:"caCertHash,omitempty"`
}

func (a *Agent) readCredential() (credentialFile, error) {
	var cf credentialFile
	data, err := os.ReadFile(a.credentialPath())
	if err != nil {
		return cf, err
	}
	if err := json.Unmarshal(data, &cf); err != nil {
		return cf, fmt.Errorf("read %s: %w", a.credentialPath(), err)
	}
	return cf, nil
}

func (a *Agent) credentialPath() string { return filepath.Join(a.cfg.DataDir, "credential.json") }

// Monitoring is the export configuration the server gave at join, if any
// (the exporter itself comes with OTLP export).
func (a *Agent) Monitoring() (*api.AgentMonitoring, error) {
	cf, err := a.readCredential()
	if err != nil {
		return nil, err
	}
	return cf.Monitoring, nil
}

// Run joins (unless a credential is kept from before) and runs the
// heartbeat loop until ctx ends; then it stops its replicas.
func (a *Agent) Run(ctx context.Context) error {
	defer func() { a.stopAll(); a.stopTelemetry() }()
	if err := os.MkdirAll(a.cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("agent data dir: %w", err)
	}
	if a.cfg.CACertHash != "" && !strings.HasPrefix(a.cfg.ServerURL, "https://") {
		return fmt.Errorf("server URL %q: %w", a.cfg.ServerURL, pki.ErrPlainHTTP)
	}
	logCtx, stopLogs := context.WithCancel(ctx)
	defer stopLogs()
	if err := a.startDNS(logCtx); err != nil {
		return err
	}
	if err := a.ensureCredential(ctx); err != nil {
		return err
	}
	a.startTelemetry(ctx)
	if err := a.findLeftovers(ctx); err != nil {
		// Not fatal: starting a replica replaces any container left under
		// its name, so nothing is duplicated; the runtime's own errors
		// show in the replicas' status.
		a.log.Warn("could not look for replicas left running", "err", err)
	}
	go a.serveLogRequests(logCtx)
	go a.measureUsage(logCtx)
	go a.watchNames(logCtx)
	go a.watchAssignments(logCtx)
	ingressDone := make(chan struct{})
	go func() {
		defer close(ingressDone)
		a.serveIngress(logCtx)
	}()
	networkDone := make(chan struct{})
	go func() {
		defer close(networkDone)
		a.keepNetwork(logCtx)
	}()
	// HAProxy stopped and the overlay down before the agent exits.
	defer func() { stopLogs(); <-ingressDone; <-networkDone }()
	go a.watchLeases(logCtx)
	interval := a.cfg.RetryInterval
	lastReport := time.Time{}
	for {
		wait, err := a.heartbeat(ctx)
		lastReport = time.Now()
		a.countHeartbeat(ctx, err)
		switch {
		case errors.Is(err, ErrMachineGone):
			return err
		case err != nil && ctx.Err() == nil:
			a.log.Warn("heartbeat failed; replicas keep running", "err", err)
			wait = min(a.cfg.RetryInterval, interval)
		case err == nil:
			interval = wait
		}
		if !a.sleep(ctx, wait, lastReport) {
			return nil
		}
	}
}

// sleep waits for the next heartbeat, waking early (but not more often
// than MinReportGap) when a replica's state changes.
func (a *Agent) sleep(ctx context.Context, wait time.Duration, last time.Time) bool {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	case <-a.changed:
		if gap := a.cfg.MinReportGap - time.Since(last); gap > 0 {
			select {
			case <-ctx.Done():
				return false
			case <-time.After(gap):
			}
		}
		return true
	}
}

func (a *Agent) nudge() {
	select {
	case a.changed <- struct{}{}:
	default:
	}
}

// findLeftovers collects the tasks a previous run of this agent left
// running (containers outlive the agent; processes do not).
func (a *Agent) findLeftovers(ctx context.Context) error {
	adopter, ok := a.driver.(runtime.Adopter)
	if !ok {
		return nil
	}
	found, err := adopter.Adopt(ctx, a.machineID)
	if err != nil {
		return fmt.Errorf("find replicas left running: %w", err)
	}
	a.adoptable = map[string]runtime.Adopted{}
	for _, t := range found {
		if prev, dup := a.adoptable[t.ReplicaID]; dup {
			// Never two of one replica: keep one, stop the other.
			go func() { _ = prev.Task.Stop(context.WithoutCancel(ctx), a.cfg.LeftoverStopTimeout) }()
		}
		a.adoptable[t.ReplicaID] = t
		a.log.Info("found replica left running", "replica", t.ReplicaID, "spec", t.SpecHash)
	}
	return nil
}

func (a *Agent) ensureCredential(ctx context.Context) error {
	if cf, err := a.readCredential(); err == nil && cf.Credential != "" {
		a.machineID, a.client = cf.MachineID, a.client.WithToken(cf.Credential)
		a.client.SetServers(cf.Servers)
		return nil
	}
	return a.join(ctx)
}

// join retries transport errors; a refused token is final.
func (a *Agent) join(ctx context.Context) error {
	if a.cfg.JoinToken == "" {
		return errors.New("no machine credential and no join token (set GANTRY_JOIN_TOKEN)")
	}
	inv := a.inventory(ctx)
	for {
		resp, err := a.client.Join(ctx, api.JoinRequest{Token: a.cfg.JoinToken, Cluster: a.cfg.Cluster, MachineID: a.cfg.MachineID, Inventory: inv})
		var apiErr *client.APIError
		if errors.As(err, &apiErr) && apiErr.Status != http.StatusTooManyRequests && apiErr.Status != http.StatusServiceUnavailable {
			return fmt.Errorf("join refused: %w", err)
		}
		if err == nil {
			a.machineID, a.client = resp.MachineID, a.client.WithToken(resp.Credential)
			a.client.SetServers(resp.Servers)
			if err := a.keepCredential(credentialFile{MachineID: resp.MachineID, Credential: resp.Credential, Monitoring: resp.Monitoring, Servers: a.client.Servers(), CACertHash: a.cfg.CACertHash}); err != nil {
				return err
			}
			a.inventorySent = true
			a.log.Info("joined", "machine", resp.MachineID, "server", a.client.Servers()[0])
			return nil
		}
		a.log.Warn("join failed; retrying", "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(a.cfg.RetryInterval):
		}
	}
}

func (a *Agent) keepCredential(cf credentialFile) error {
	if err := atomicfile.WriteJSON(a.credentialPath(), cf); err != nil {
		return fmt.Errorf("keep machine credential: %w", err)
	}
	return nil
}

// learnServers takes a server list from the server, and keeps it for the
// agent's next start when it changed.
func (a *Agent) learnServers(urls []string) {
	if len(urls) == 0 || slices.Equal(sortedCopy(urls), sortedCopy(a.client.Servers())) {
		return
	}
	a.client.SetServers(urls)
	cf, err := a.readCredential()
	if err == nil {
		cf.Servers = a.client.Servers()
		err = a.keepCredential(cf)
	}
	if err != nil {
		a.log.Warn("keep the server list", "err", err)
	}
}

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

func (a *Agent) inventory(ctx context.Context) api.Inventory {
	capacity := detectCapacity(a.cfg.DataDir)
	if c := a.cfg.Capacity; c.MilliCPU > 0 {
		capacity.MilliCPU = c.MilliCPU
	}
	if c := a.cfg.Capacity; c.MemoryBytes > 0 {
		capacity.MemoryBytes = c.MemoryBytes
	}
	if c := a.cfg.Capacity; c.EphemeralBytes > 0 {
		capacity.EphemeralBytes = c.EphemeralBytes
	}
	gpus, err := detectGPUs(ctx, a.cfg.GPUProbeTimeout)
	if err != nil {
		a.log.Warn("GPU detection failed", "err", err)
	}
	capacity.GPUs = len(gpus)
	runtimes := []string{a.driver.Name()}
	if lister, ok := a.driver.(runtime.RuntimeLister); ok {
		if runtimes, err = lister.Runtimes(ctx); err != nil {
			a.log.Warn("runtime detection failed", "err", err)
		}
	}
	inv := api.Inventory{Capacity: capacity, GPUs: gpus, Runtimes: runtimes, Labels: a.cfg.Labels,
		Zone: a.cfg.Zone, Version: a.cfg.Version, TemplateVersion: a.cfg.TemplateVersion, InstanceID: a.cfg.ProviderID}
	if a.cfg.Address != "" {
		inv.Addresses = []string{a.cfg.Address}
	}
	if a.dns != nil {
		inv.DNSAddress = a.dns.Addr()
	}
	inv.Hostname, _ = os.Hostname()
	inv.Conditions = a.conditionList()
	inv.MeshKey, inv.MeshEndpoint = a.overlayIdentity()
	return inv
}

// setCondition records one of the agent's conditions; a change of its
// status or reason is reported at the next heartbeat.
func (a *Agent) setCondition(typ string, ok bool, reason, message string) {
	status := map[bool]string{true: "True", false: "False"}[ok]
	a.conditionsMu.Lock()
	old, had := a.conditions[typ]
	changed := !had || old.Status != status || old.Reason != reason || old.Message != message
	if changed {
		if a.conditions == nil {
			a.conditions = map[string]api.Condition{}
		}
		since := time.Now().UTC()
		if had && old.Status == status {
			since = old.LastTransitionTime
		}
		a.conditions[typ] = api.Condition{Type: typ, Status: status, Reason: reason, Message: message, LastTransitionTime: since}
	}
	a.conditionsMu.Unlock()
	if changed {
		a.resendInventory.Store(true)
		a.nudge()
	}
}

// clearCondition forgets one of the agent's conditions (the part it
// reports on is not in use).
func (a *Agent) clearCondition(typ string) {
	a.conditionsMu.Lock()
	_, had := a.conditions[typ]
	delete(a.conditions, typ)
	a.conditionsMu.Unlock()
	if had {
		a.resendInventory.Store(true)
		a.nudge()
	}
}

func (a *Agent) conditionList() []api.Condition {
	a.conditionsMu.Lock()
	defer a.conditionsMu.Unlock()
	out := make([]api.Condition, 0, len(a.conditions))
	for _, c := range a.conditions {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Type < out[j].Type })
	return out
}

// heartbeat reports status, applies the answer, and returns the interval
// the server asks for.
func (a *Agent) heartbeat(ctx context.Context) (time.Duration, error) {
	sentAt := a.leaseClock().Now()
	req := api.HeartbeatRequest{Replicas: a.statuses(), Sequence: a.nextSequence(), Usage: a.usage.snapshot()}
	resend := a.resendInventory.Swap(false)
	if !a.inventorySent || resend {
		inv := a.inventory(ctx)
		req.Inventory = &inv
	}
	resp, err := a.client.WithAttemptTimeout(a.cfg.HeartbeatAttemptTimeout).Heartbeat(ctx, a.machineID, req)
	if client.IsStatus(err, http.StatusGone) || client.IsStatus(err, http.StatusNotFound) {
		a.log.Warn("server says this machine is gone; stopping replicas", "machine", a.machineID)
		a.reconcile(ctx, nil)
		return 0, ErrMachineGone
	}
	if client.IsStatus(err, http.StatusUnauthorized) && a.cfg.JoinToken != "" {
		a.log.Warn("credential refused; joining again")
		return a.cfg.RetryInterval, a.join(ctx)
	}
	if err != nil {
		if resend {
			a.resendInventory.Store(true)
		}
		return 0, err
	}
	a.renewed(sentAt)
	a.inventorySent = true
	a.learnServers(resp.Servers)
	a.reconcile(ctx, resp.Assignments)
	interval, err := time.ParseDuration(resp.HeartbeatInterval)
	if err != nil || interval <= 0 {
		return 0, fmt.Errorf("server sent heartbeat interval %q", resp.HeartbeatInterval)
	}
	return interval, nil
}

func (a *Agent) statuses() []api.ReplicaStatus {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]api.ReplicaStatus, 0, len(a.supervisors))
	for _, s := range a.supervisors {
		st := s.snapshot()
		if f := s.assignment.Spec.Failover; f != nil {
			st.Member = a.memberStatus(f.Group)
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ReplicaID < out[j].ReplicaID })
	return out
}

// reconcile starts assigned replicas that do not run, restarts those whose
// spec changed, and stops those no longer assigned here.
func (a *Agent) reconcile(ctx context.Context, assignments []api.Assignment) {
	a.overlayAddresses(assignments)
	want := map[string]api.Assignment{}
	for _, as := range assignments {
		want[as.ReplicaID] = as
	}
	a.mu.Lock()
	var stopping []*supervisor
	for id, s := range a.supervisors {
		if as, ok := want[id]; !ok || as.SpecHash != s.assignment.SpecHash || as.Incarnation != s.assignment.Incarnation {
			stopping = append(stopping, s)
			delete(a.supervisors, id)
		}
	}
	adoptable := a.adoptable
	a.adoptable = nil
	a.mu.Unlock()
	haltAll(stopping)
	for _, as := range assignments {
		a.mu.Lock()
		ranOut := as.Failover != nil && as.Failover.LeaseSeconds > 0 && !a.renewedAt.IsZero() && a.leaseRanOut(as.Failover)
		a.mu.Unlock()
		if ranOut {
			// An answer that comes after the lease it renews ran out (it
			// was sent before the server went away) must not start a
			// primary again: fenced, as the lease watch left it.
			fenced := *as.Failover
			fenced.Role = api.RoleFenced
			a.writeRole(&fenced)
			continue
		}
		if as.Failover != nil {
			a.writeRole(as.Failover)
		}
		a.mu.Lock()
		s, running := a.supervisors[as.ReplicaID]
		if running {
			s.setRole(as.Failover)
		}
		a.mu.Unlock()
		if running {
			continue
		}
		var adopted runtime.Task
		if t, ok := adoptable[as.ReplicaID]; ok && t.SpecHash == as.SpecHash {
			adopted = t.Task
			delete(adoptable, as.ReplicaID)
			a.log.Info("adopted replica", "replica", as.ReplicaID)
		}
		s, err := newSupervisor(a, as, adopted)
		if err != nil {
			a.log.Error("cannot start replica", "replica", as.ReplicaID, "err", err)
			continue
		}
		a.mu.Lock()
		a.supervisors[as.ReplicaID] = s
		a.mu.Unlock()
		a.log.Info("starting replica", "replica", as.ReplicaID, "spec", as.SpecHash, "ports", s.hostPorts)
		go s.run(context.WithoutCancel(ctx))
		if a.telemetry != nil {
			go a.shipOutput(untilDone(ctx, s.done), as, adopted == nil)
		}
	}
	a.stopLeftovers(ctx, adoptable)
}

// stopLeftovers removes tasks of replicas no longer assigned here (or
// assigned with another spec).
func (a *Agent) stopLeftovers(ctx context.Context, left map[string]runtime.Adopted) {
	log := a.log
	var wg sync.WaitGroup
	for id, t := range left {
		log.Info("removing replica left running that is no longer assigned here", "replica", id)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := t.Task.Stop(context.WithoutCancel(ctx), a.cfg.LeftoverStopTimeout); err != nil {
				log.Warn("remove leftover replica", "replica", id, "err", err)
			}
		}()
	}
	wg.Wait()
}

func haltAll(ss []*supervisor) {
	var wg sync.WaitGroup
	for _, s := range ss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.halt()
		}()
	}
	wg.Wait()
}

func (a *Agent) stopAll() {
	a.mu.Lock()
	var all []*supervisor
	for id, s := range a.supervisors {
		all = append(all, s)
		delete(a.supervisors, id)
	}
	a.mu.Unlock()
	haltAll(all)
}
