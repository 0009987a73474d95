// Package exec is the provider for any cloud CLI or bare metal: machines
// are made and removed by the operator's shell command templates (see
// Commands). Values reach the commands as shell-quoted literals and as
// GANTRY_* environment variables, never by re-parsing, so no label or tag
// can inject shell syntax.
//
// Protocol. launch prints the new machine's provider id as the last line
// of its output. describe prints a JSON object {"state": "...",
// "addresses": [...]}, with state one of pending, running, stopping,
// stopped, terminating, terminated or not-found. list prints a JSON array
// of such objects, each with its "id" and "tags". start may print what
// describe prints. Exit status 3 means insufficient capacity, 4 an
// authorization failure, 5 not found; any other failure is a transport
// error carrying the command's stderr.
package exec

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	osexec "os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/internal/atomicfile"
	"github.com/gantry-dev/gantry/provisioner"
)

// Name is the provider's name in cluster specs.
const Name = "exec"

// Exit statuses of commands with a meaning.
const (
	ExitInsufficientCapacity = 3
	ExitAuth                 = 4
	ExitNotFound             = 5
)

type record struct {
	provisioner.Instance
	Key string `json:"key"`
	Dir string `json:"dir"`
	// Subnet is the machine's /24 the route command routes to it ("":
	// none); Routed says the route command succeeded.
	Subnet string `json:"subnet,omitempty"`
	Routed bool   `json:"routed,omitempty"`
}

// Provider runs the commands.
type Provider struct {
	cfg Config
	provisioner.Catalog

	mu      sync.Mutex
	records map[string]*record
}

var _ provisioner.Provisioner = (*Provider)(nil)

// New validates the configuration and loads the records.
func New(cfg Config) (*Provider, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("exec provider: %w", err)
	}
	if cfg.Shell == "" {
		cfg.Shell = "/bin/sh"
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Minute
	}
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("exec provider state dir: %w", err)
	}
	p := &Provider{cfg: cfg, Catalog: provisioner.Catalog{Types: cfg.catalog()}, records: map[string]*record{}}
	if err := p.load(); err != nil {
		return nil, err
	}
	return p, nil
}

// Name implements provisioner.Provisioner.
func (p *Provider) Name() string { return Name }

var providerIDRe = regexp.MustCompile(`^[A-Za-z0-9._:/@+-]{1,256}$`)

// Launch runs the launch command and records the machine it made.
func (p *Provider) Launch(ctx context.Context, spec provisioner.LaunchSpec) (*provisioner.Instance, error) {
	it, err := p.CheckLaunch(spec)
	if err != nil {
		return nil, err
	}
	if existing := p.byKey(spec.IdempotencyKey); existing != nil {
		if err := p.route(ctx, existing.ID); err != nil {
			return nil, err
		}
		return p.Describe(ctx, existing.ID)
	}
	dir := filepath.Join(p.cfg.StateDir, "machines", safeName(spec.IdempotencyKey))
	values, err := p.launchValues(spec, it, dir)
	if err != nil {
		return nil, err
	}
	out, err := p.run(ctx, "launch", p.cfg.Commands.Launch, values)
	if err != nil {
		return nil, err
	}
	id := lastLine(out)
	if !providerIDRe.MatchString(id) {
		return nil, provisioner.Errorf(provisioner.KindTransport, "launch", "the launch command must print the provider id as its last line; got %q", id)
	}
	zone := spec.Zone
	if zone == "" && len(it.Offerings) > 0 {
		zone = it.Offerings[0].Zone
	}
	r := &record{Key: spec.IdempotencyKey, Dir: dir, Instance: provisioner.Instance{ID: id, State: provisioner.StatePending, InstanceType: it.Name,
		CapacityType: cmp.Or(spec.CapacityType, api.CapacityOnDemand), Zone: zone, LaunchedAt: time.Now().UTC(), Tags: maps.Clone(spec.Tags)}}
	if spec.Bootstrap.NetworkMode == api.NetworkRouted {
		r.Subnet = spec.Subnet
	}
	p.mu.Lock()
	p.records[id] = r
	err = p.saveLocked()
	inst := r.Instance
	p.mu.Unlock()
	if err != nil {
		return nil, err
	}
	// A failed route fails the launch; the launch tried again (same
	// idempotency key) routes the machine it made.
	if err := p.route(ctx, id); err != nil {
		return nil, err
	}
	return &inst, nil
}

// route runs the route command for a machine with a /24 not routed yet.
func (p *Provider) route(ctx context.Context, id string) error {
	r, ok := p.record(id)
	if !ok || r.Subnet == "" || r.Routed || p.cfg.Commands.Route == "" {
		return nil
	}
	values := idValues(r)
	values["subnet"] = r.Subnet
	if _, err := p.run(ctx, "route", p.cfg.Commands.Route, values); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if r, ok := p.records[id]; ok {
		r.Routed = true
	}
	return p.saveLocked()
}

// launchValues are the placeholders of a launch; secrets go to 0600 files.
func (p *Provider) launchValues(spec provisioner.LaunchSpec, it provisioner.InstanceType, dir string) (map[string]string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("machine dir: %w", err)
	}
	var userData string
	if p.cfg.UserData != nil {
		var err error
		if userData, err = p.cfg.UserData(spec); err != nil {
			return nil, provisioner.Errorf(provisioner.KindInvalid, "launch", "user data: %v", err)
		}
	}
	tokenFile, userDataFile := filepath.Join(dir, "join-token"), filepath.Join(dir, "user-data")
	for path, content := range map[string]string{tokenFile: spec.Bootstrap.JoinToken, userDataFile: userData} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			return nil, fmt.Errorf("write %s: %w", filepath.Base(path), err)
		}
	}
	tagsJSON, _ := json.Marshal(spec.Tags)
	b := spec.Bootstrap
	labels := map[string]string{}
	for k, v := range spec.Tags {
		if !strings.HasPrefix(k, "gantry.dev/") {
			labels[k] = v
		}
	}
	values := map[string]string{
		"instance_type": it.Name, "cpu": api.FormatCPU(it.MilliCPU), "memory_mib": strconv.FormatInt(it.MemoryBytes>>20, 10),
		"memory_bytes": strconv.FormatInt(it.MemoryBytes, 10), "zone": spec.Zone, "capacity_type": cmp.Or(spec.CapacityType, api.CapacityOnDemand),
		"labels": pairs(labels), "tags": pairs(spec.Tags), "tags_json": string(tagsJSON), "user_data": userData, "user_data_file": userDataFile,
		"idempotency_key": spec.IdempotencyKey, "server_url": b.ServerURL, "cluster": b.Cluster, "group": b.Group, "machine": b.MachineID,
		"join_token_file": tokenFile, "template_version": b.TemplateVersion, "agent_runtime": cmp.Or(p.cfg.AgentRuntime, "docker"),
	}
	if b.NetworkMode == api.NetworkRouted {
		values["subnet"] = spec.Subnet
	}
	for _, arch := range []string{"amd64", "arm64"} {
		bin := b.AgentBinaries[arch]
		values["agent_binary_url_"+arch], values["agent_binary_sha256_"+arch] = bin.URL, bin.SHA256
	}
	return values, nil
}

// run executes one command template, killing its process group on
// timeout, and returns its stdout; a failure is typed by exit status and
// carries stderr.
func (p *Provider) run(ctx context.Context, op, tmpl string, values map[string]string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	cmd := osexec.Command(p.cfg.Shell, "-c", expand(tmpl, values))
	cmd.Env = os.Environ()
	for k, v := range values {
		cmd.Env = append(cmd.Env, "GANTRY_"+strings.ToUpper(k)+"="+v)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, provisioner.Errorf(provisioner.KindTransport, op, "start %s: %v", p.cfg.Shell, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		return nil, provisioner.Errorf(provisioner.KindTransport, op, "%s command timed out after %s: %s", op, p.cfg.Timeout, tail(stderr.String()))
	}
	if err == nil {
		return stdout.Bytes(), nil
	}
	kind := provisioner.KindTransport
	var exitErr *osexec.ExitError
	if errors.As(err, &exitErr) {
		switch exitErr.ExitCode() {
		case ExitInsufficientCapacity:
			kind = provisioner.KindInsufficientCapacity
		case ExitAuth:
			kind = provisioner.KindAuth
		case ExitNotFound:
			kind = provisioner.KindNotFound
		}
	}
	return nil, provisioner.Errorf(kind, op, "%s command: %v: %s", op, err, tail(stderr.String()))
}

func tail(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 2000 {
		s = "..." + s[len(s)-2000:]
	}
	return s
}

func lastLine(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

func (p *Provider) byKey(key string) *record {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.records {
		if r.Key == key {
			return r
		}
	}
	return nil
}

func (p *Provider) statePath() string { return filepath.Join(p.cfg.StateDir, "instances.json") }

func (p *Provider) load() error {
	var records []*record
	if _, err := atomicfile.ReadJSON(p.statePath(), &records); err != nil {
		return fmt.Errorf("exec provider state: %w", err)
	}
	for _, r := range records {
		p.records[r.ID] = r
	}
	return nil
}

func (p *Provider) saveLocked() error {
	records := make([]*record, 0, len(p.records))
	for _, r := range p.records {
		records = append(records, r)
	}
	return atomicfile.WriteJSON(p.statePath(), records)
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9._-]`)

func safeName(s string) string { return unsafeChars.ReplaceAllString(s, "_") }

// Routes says whether this provider's commands route each machine's /24
// to it (network mode routed).
func (p *Provider) Routes() error { return p.cfg.Commands.Routes() }
