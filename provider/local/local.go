// Package local is the provider whose machines are `gantry agent` processes
// on this host. Each machine advertises the resources of its instance type
// from a small built-in catalog. An agent's arguments carry its instance's
// id, type and tags, as a cloud keeps them: any server of the
// installation (a restarted one, or another taking over the lead) finds
// the machines on this host by them (List by tags). A file keeps what the
// host cannot show: instances pending or stopped by this server.
package local

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gantry-dev/gantry/internal/randid"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/internal/procgroup"
	"github.com/gantry-dev/gantry/provisioner"
)

// Name is the provider's name in cluster specs.
const Name = "local"

// Config tunes the provider.
type Config struct {
	// AgentBinary is the gantry executable to run as each machine's agent.
	AgentBinary string
	// StateDir holds the instance table and one directory per machine.
	StateDir string
	// StopGrace is how long an agent has to stop after SIGTERM.
	StopGrace time.Duration
	// ExitWithServer ties each agent's life to this process (used by
	// `gantry dev`): if the server dies, its machines die too.
	ExitWithServer bool
	// AgentArgs are extra flags for every agent.
	AgentArgs []string
	// Installation is the installation's id (the servers sharing a
	// store): machines tagged with it that another server launched are
	// found on the host and adopted ("" adopts nothing).
	Installation string
	// ReleaseMachine, when set, removes what a halted machine's replicas
	// left outside its process group (containers of agents using the
	// docker runtime), by machine name.
	ReleaseMachine func(ctx context.Context, machineID string) error
	// PassEnv names the variables of this process an agent inherits (when
	// set here); nothing else of the server's environment reaches it,
	// since that holds the admin token, the encryption key and secret
	// values. Default: DefaultPassEnv.
	PassEnv []string
	// Netns, when set, puts each machine in a network namespace of its
	// own on a bridge of the host (see Netns).
	Netns  *Netns
	Logger *slog.Logger
}

// DefaultPassEnv is what an agent needs of its host's environment: where
// programs are, a home and temporary directory, the locale, and how to
// reach the Docker Engine.
var DefaultPassEnv = []string{"PATH", "HOME", "TMPDIR", "TZ", "LANG", "LC_ALL", "DOCKER_HOST", "DOCKER_CERT_PATH", "DOCKER_TLS_VERIFY", "DOCKER_API_VERSION", "GOCOVERDIR"}

type record struct {
	provisioner.Instance
	Key  string   `json:"key"`
	PID  int      `json:"pid"`
	Args []string `json:"args"`
	// Address is the machine's (127.0.0.1, or its namespace's).
	Address string `json:"address,omitempty"`
	// Subnet is the machine's /24 the host routes to its namespace (a
	// cluster in network mode routed).
	Subnet string `json:"subnet,omitempty"`
}

// Routes says whether this provider routes each machine's /24 to it: with
// its machines in network namespaces, the host (the bridge's router, as a
// VPC's) holds a route for each machine's /24 through its address.
func (p *Provider) Routes() error {
	if !p.cfg.Netns.Enabled() {
		return fmt.Errorf("the local provider routes machines' /24s only with its machines in network namespaces (gantry server --local-netns-bridge)")
	}
	return nil
}

// addressesTaken are the addresses of machines not terminated.
func (p *Provider) addressesTaken() map[string]bool {
	out := map[string]bool{}
	for _, r := range p.records {
		if r.State != provisioner.StateTerminated && r.Address != "" {
			out[r.Address] = true
		}
	}
	return out
}

// Provider is the local provisioner.
type Provider struct {
	cfg Config
	provisioner.Catalog
	mu      sync.Mutex
	records map[string]*record
	// leaders are the agents this process started, by instance: their
	// groups are signalled only while they are not reaped (procgroup).
	leaders map[string]*procgroup.Leader
}

var _ provisioner.Provisioner = (*Provider)(nil)

// New loads the provider's state from cfg.StateDir.
func New(cfg Config) (*Provider, error) {
	if cfg.StopGrace == 0 {
		cfg.StopGrace = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.PassEnv == nil {
		cfg.PassEnv = DefaultPassEnv
	}
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("local provider state dir: %w", err)
	}
	p := &Provider{cfg: cfg, Catalog: provisioner.Catalog{Types: Catalog()}, records: map[string]*record{}, leaders: map[string]*procgroup.Leader{}}
	if err := p.load(); err != nil {
		return nil, err
	}
	return p, nil
}

// Name implements provisioner.Provisioner.
func (p *Provider) Name() string { return Name }

// Launch starts an agent process and returns at once with the instance
// pending. A retried launch with the same key returns the same instance.
func (p *Provider) Launch(ctx context.Context, spec provisioner.LaunchSpec) (*provisioner.Instance, error) {
	it, err := p.CheckLaunch(spec)
	if err != nil {
		return nil, err
	}
	if spec.Zone != "" && spec.Zone != Zone {
		return nil, provisioner.Errorf(provisioner.KindInsufficientCapacity, "launch", "zone %q: the local provider has only %s", spec.Zone, Zone)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.records {
		if r.Key == spec.IdempotencyKey {
			inst := p.refresh(r)
			return &inst, nil
		}
	}
	id := "local-" + randid.Hex(4)
	r := &record{Key: spec.IdempotencyKey, Instance: provisioner.Instance{
		ID: id, State: provisioner.StatePending, InstanceType: it.Name, CapacityType: cmp.Or(spec.CapacityType, api.CapacityOnDemand),
		Zone: Zone, LaunchedAt: time.Now().UTC(), Tags: maps.Clone(spec.Tags),
	}}
	r.Address = "127.0.0.1"
	if p.cfg.Netns.Enabled() {
		addr, err := p.cfg.Netns.address(p.addressesTaken())
		if err != nil {
			return nil, provisioner.Errorf(provisioner.KindInsufficientCapacity, "launch", "%v", err)
		}
		r.Address = addr.String()
		if spec.Bootstrap.NetworkMode == api.NetworkRouted {
			r.Subnet = spec.Subnet
		}
	}
	r.Args = p.agentArgs(id, r.Address, it, r.CapacityType, spec.Tags, spec.Bootstrap)
	p.records[id] = r
	if err := p.save(); err != nil {
		delete(p.records, id)
		return nil, err
	}
	go p.boot(id, spec.Bootstrap.JoinToken)
	inst := r.Instance
	return &inst, nil
}

// agentArgs are a machine's agent's arguments. They carry the instance's
// id, type and tags, as a cloud keeps them with the instance: any server
// of the installation finds the machine on this host by them (hostscan.go).
func (p *Provider) agentArgs(id, address string, it provisioner.InstanceType, capacityType string, tags map[string]string, b provisioner.Bootstrap) []string {
	args := []string{"agent",
		"--server", b.ServerURL, "--cluster", b.Cluster, "--group", b.Group, "--machine-id", b.MachineID,
		"--zone", Zone, "--address", address,
		"--data-dir", p.machineDir(id),
		"--cpu", api.FormatCPU(it.MilliCPU), "--memory", fmt.Sprint(it.MemoryBytes), "--ephemeral-storage", fmt.Sprint(it.EphemeralBytes),
		"--provider-id", id, "--instance-type", it.Name, "--capacity-type", capacityType,
	}
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		args = append(args, "--tag", k+"="+tags[k])
	}
	if b.TemplateVersion != "" {
		args = append(args, "--template-version", b.TemplateVersion)
	}
	return append(args, p.cfg.AgentArgs...)
}

func (p *Provider) machineDir(id string) string { return filepath.Join(p.cfg.StateDir, "machines", id) }

// boot starts the agent process. The join token goes through a 0600 file,
// never argv or the environment, so neither `ps` nor /proc shows it.
func (p *Provider) boot(id, joinToken string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.records[id]
	if !ok || r.State != provisioner.StatePending {
		return
	}
	if err := p.startProcess(r, joinToken); err != nil {
		p.cfg.Logger.Error("local machine failed to start", "instance", id, "err", err)
		r.State = provisioner.StateTerminated
	}
	_ = p.save()
}

func (p *Provider) startProcess(r *record, joinToken string) error {
	dir := p.machineDir(r.ID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("machine dir: %w", err)
	}
	logFile, err := os.OpenFile(filepath.Join(dir, "agent.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("agent log: %w", err)
	}
	defer logFile.Close()
	args := r.Args
	if joinToken != "" {
		tokenPath := filepath.Join(dir, "join-token")
		if err := os.WriteFile(tokenPath, []byte(joinToken), 0o600); err != nil {
			return fmt.Errorf("write join token: %w", err)
		}
		args = append(append([]string{}, args...), "--join-token-file", tokenPath)
	}
	binary := p.cfg.AgentBinary
	if n := p.cfg.Netns; n.Enabled() {
		addr, err := netip.ParseAddr(r.Address)
		if err != nil {
			return fmt.Errorf("machine address %q: %w", r.Address, err)
		}
		if err := n.create(r.ID, addr); err != nil {
			return err
		}
		if err := n.route(r.Subnet, addr); err != nil {
			n.remove(r.ID)
			return err
		}
		binary, args = n.wrap(r.ID, binary, args)
	}
	cmd := exec.Command(binary, args...)
	cmd.Env = agentEnv(p.cfg.PassEnv, os.LookupEnv)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	if p.cfg.ExitWithServer {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGTERM
	}
	leader, err := procgroup.Start(cmd)
	if err != nil {
		return fmt.Errorf("start agent: %w", err)
	}
	r.PID = leader.Pid()
	r.State = provisioner.StateRunning
	r.Addresses = []string{cmp.Or(r.Address, "127.0.0.1")}
	p.leaders[r.ID] = leader
	return nil
}

// agentEnv is the explicit environment of an agent: the variables named
// in pass that are set.
func agentEnv(pass []string, lookup func(string) (string, bool)) []string {
	env := []string{}
	for _, name := range pass {
		if v, ok := lookup(name); ok {
			env = append(env, name+"="+v)
		}
	}
	return env
}

// Terminate stops the machine's agent (SIGTERM, then SIGKILL of its whole
// process group after StopGrace). Unknown ids are not an error.
func (p *Provider) Terminate(ctx context.Context, id string) error {
	return p.halt(ctx, id, provisioner.StateTerminating, provisioner.StateTerminated)
}

// Stop halts the agent but keeps the machine's directory for Start.
func (p *Provider) Stop(ctx context.Context, id string) error {
	p.mu.Lock()
	r, ok := p.records[id]
	p.mu.Unlock()
	if !ok || p.refreshLocked(r).State == provisioner.StateTerminated {
		return provisioner.Errorf(provisioner.KindNotFound, "stop", "instance %s", id)
	}
	return p.halt(ctx, id, provisioner.StateStopping, provisioner.StateStopped)
}

func (p *Provider) halt(ctx context.Context, id string, during, final provisioner.State) error {
	p.mu.Lock()
	r, ok := p.records[id]
	if !ok {
		p.adoptFromHost()
		r, ok = p.records[id]
	}
	if !ok || r.State == provisioner.StateTerminated || (r.State == final) {
		p.mu.Unlock()
		return nil
	}
	pid, leader, running := r.PID, p.leaders[id], p.alive(r)
	r.State = during // a boot that has not run yet now never will
	_ = p.save()
	p.mu.Unlock()

	switch {
	case pid <= 0 || !running:
	case leader != nil:
		// Started here: what it left in its group is killed as it is
		// reaped, and its group is signalled only until then.
		leader.SignalLeader(syscall.SIGTERM)
		if !waitExit(ctx, pid, leader.Done(), p.cfg.StopGrace) {
			leader.Signal(syscall.SIGKILL)
			waitExit(ctx, pid, leader.Done(), p.cfg.StopGrace)
		}
	default:
		// Found from an earlier server: not this process's child, so its
		// exit cannot be held off, and its group is killed after it.
		_ = syscall.Kill(pid, syscall.SIGTERM)
		if !waitExit(ctx, pid, nil, p.cfg.StopGrace) {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			waitExit(ctx, pid, nil, p.cfg.StopGrace)
		}
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
	if p.cfg.Netns.Enabled() {
		p.cfg.Netns.remove(id)
		p.cfg.Netns.unroute(r.Address)
	}
	if release := p.cfg.ReleaseMachine; release != nil {
		if err := release(ctx, r.Tags[provisioner.TagMachine]); err != nil {
			return provisioner.Errorf(provisioner.KindTransport, "halt", "release machine %s: %v", id, err)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	r.State, r.PID = final, 0
	if final == provisioner.StateStopped {
		r.Addresses = nil
	}
	return p.save()
}

// Start resumes a stopped machine with a new agent process.
func (p *Provider) Start(ctx context.Context, id string) (*provisioner.Instance, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.records[id]
	if !ok || r.State == provisioner.StateTerminated {
		return nil, provisioner.Errorf(provisioner.KindNotFound, "start", "instance %s", id)
	}
	if r.State == provisioner.StateRunning || r.State == provisioner.StatePending {
		inst := r.Instance
		return &inst, nil
	}
	if r.State != provisioner.StateStopped {
		return nil, provisioner.Errorf(provisioner.KindInvalid, "start", "instance %s is %s", id, r.State)
	}
	// The agent rejoins with the credential it keeps in its data dir.
	if err := p.startProcess(r, ""); err != nil {
		return nil, provisioner.Errorf(provisioner.KindTransport, "start", "%v", err)
	}
	if err := p.save(); err != nil {
		return nil, err
	}
	inst := r.Instance
	return &inst, nil
}

// Describe implements provisioner.Provisioner.
func (p *Provider) Describe(ctx context.Context, id string) (*provisioner.Instance, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.records[id]
	if !ok {
		p.adoptFromHost()
		r, ok = p.records[id]
	}
	if !ok {
		return nil, provisioner.Errorf(provisioner.KindNotFound, "describe", "instance %s", id)
	}
	inst := p.refresh(r)
	return &inst, nil
}

// List implements provisioner.Provisioner.
func (p *Provider) List(ctx context.Context, f provisioner.Filter) ([]provisioner.Instance, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.adoptFromHost()
	var out []provisioner.Instance
	for _, r := range p.records {
		if inst := p.refresh(r); f.Matches(inst) {
			out = append(out, inst)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// refresh marks a running machine whose agent died as terminated (a local
// machine is its agent process) and returns a copy. Callers hold p.mu.
func (p *Provider) refresh(r *record) provisioner.Instance {
	if (r.State == provisioner.StateRunning) && !p.alive(r) {
		r.State, r.PID = provisioner.StateTerminated, 0
		// Whatever the dead agent left in its process group goes too.
		_ = p.save()
	}
	inst := r.Instance
	inst.Tags = maps.Clone(r.Tags)
	inst.Addresses = append([]string(nil), r.Addresses...)
	return inst
}

func (p *Provider) refreshLocked(r *record) provisioner.Instance {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refresh(r)
}

// alive checks the pid still runs this machine's agent (pids get reused).
// Callers hold p.mu.
func (p *Provider) alive(r *record) bool {
	if r.PID <= 0 {
		return false
	}
	if leader, ok := p.leaders[r.ID]; ok {
		select {
		case <-leader.Done():
			return false
		default:
			return true
		}
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", r.PID))
	return err == nil && strings.Contains(string(cmdline), "\x00"+r.ID+"\x00")
}

// ShutdownAll terminates every machine (used by `gantry dev` on exit).
func (p *Provider) ShutdownAll(ctx context.Context) {
	insts, _ := p.List(ctx, provisioner.Filter{})
	var wg sync.WaitGroup
	for _, inst := range insts {
		wg.Add(1)
		go func(id string) {
			defer wg.Done()
			_ = p.Terminate(ctx, id)
		}(inst.ID)
	}
	wg.Wait()
}

func waitExit(ctx context.Context, pid int, done <-chan struct{}, limit time.Duration) bool {
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if done != nil {
			select {
			case <-done:
				return true
			default:
			}
		} else if syscall.Kill(pid, 0) != nil {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-deadline.C:
			return false
		case <-tick.C:
		}
	}
}
