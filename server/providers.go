package server

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/api"
	dockerprovider "github.com/gantry-dev/gantry/provider/docker"
	execprov "github.com/gantry-dev/gantry/provider/exec"
	"github.com/gantry-dev/gantry/provider/external"
	"github.com/gantry-dev/gantry/provider/local"
	"github.com/gantry-dev/gantry/provider/registry"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/provisioner/cloudinit"
	dockerrt "github.com/gantry-dev/gantry/runtime/docker"
	"go.yaml.in/yaml/v3"
)

// prepareProviders makes the built-in providers with server-wide settings
// and registers them with the others; none contacts anything until the
// first cluster uses it. Providers with per-cluster settings (a cloud
// region) are made on first use.
func (s *Server) prepareProviders(exe, installation string) error {
	if s.cfg.LocalRuntime == "" {
		s.cfg.LocalRuntime = "process"
	}
	var err error
	localCfg := local.Config{
		AgentBinary: exe, StateDir: filepath.Join(s.cfg.DataDir, "local"), StopGrace: s.cfg.LocalStopGrace,
		ExitWithServer: s.cfg.LocalExitWithServer, AgentArgs: append([]string{"--runtime", s.cfg.LocalRuntime}, s.cfg.LocalAgentArgs...), Logger: s.log,
		Installation: installation,
	}
	if s.cfg.LocalNetnsBridge != "" {
		prefix, err := netip.ParsePrefix(s.cfg.LocalNetnsCIDR)
		if err != nil {
			return fmt.Errorf("--local-netns-cidr %q: %w", s.cfg.LocalNetnsCIDR, err)
		}
		localCfg.Netns = &local.Netns{Bridge: s.cfg.LocalNetnsBridge, Prefix: prefix}
	}
	if s.cfg.LocalRuntime == dockerrt.Name {
		// A killed agent's containers outlive it; they go with its machine.
		cli, err := dockerrt.NewClient(s.cfg.Docker.Host)
		if err != nil {
			return err
		}
		localCfg.ReleaseMachine = func(ctx context.Context, machineID string) error {
			return dockerrt.RemoveReplicas(ctx, cli, machineID, dockerrt.DefaultSecretsDir)
		}
	}
	if s.local, err = local.New(localCfg); err != nil {
		return err
	}
	dc := s.cfg.Docker
	if dc.StateDir == "" {
		dc.StateDir = filepath.Join(s.cfg.DataDir, "docker")
	}
	if dc.AgentBinary == "" {
		dc.AgentBinary = exe
	}
	dc.Logger = s.log
	docker, err := dockerprovider.New(dc)
	if err != nil {
		return err
	}
	in := Instances{Local: s.local, LocalRuntime: s.cfg.LocalRuntime, Docker: docker}
	if s.cfg.ExecConfig != "" {
		exec, runtime, err := loadExec(s.cfg.ExecConfig, filepath.Join(s.cfg.DataDir, "exec"))
		if err != nil {
			return err
		}
		in.Exec, in.ExecRuntime = exec, runtime
	}
	entries := BuiltinProviders(in)
	s.registry = registry.New(s.cfg.WrapProvider, append(entries, s.cfg.Providers...)...)
	return nil
}

// Instances are the built-in providers' instances on this server (nil
// where there is none: offline, or exec without its settings).
type Instances struct {
	Local        provisioner.Provisioner
	LocalRuntime string
	Docker       provisioner.Provisioner
	Exec         provisioner.Provisioner
	// ExecRuntime is the runtime of exec machines' agents (default
	// docker).
	ExecRuntime string
}

// BuiltinProviders are the providers every server has: local, docker,
// exec and external. Without instances they only describe (offline
// validation and `gantry plan`).
func BuiltinProviders(in Instances) []registry.Entry {
	fixed := func(p provisioner.Provisioner) func(string) (provisioner.Provisioner, error) {
		if p == nil {
			return nil
		}
		return func(string) (provisioner.Provisioner, error) { return p, nil }
	}
	catalog := func(types []provisioner.InstanceType) func(api.ProviderSpec) ([]provisioner.InstanceType, bool) {
		return func(api.ProviderSpec) ([]provisioner.InstanceType, bool) { return types, true }
	}
	execEntry := registry.Entry{Name: execprov.Name, Runtimes: []string{cmp.Or(in.ExecRuntime, dockerrt.Name)}, Provisions: true, CanStop: true, NetworkMode: api.NetworkOverlay,
		AgentBinaries: registry.BinariesOptional, New: fixed(in.Exec),
		Unavailable: "not configured on this server (start it with --exec-config FILE)"}
	if in.Exec != nil {
		execEntry.Catalog = catalog(in.Exec.InstanceTypes())
		if router, ok := in.Exec.(interface{ Routes() error }); ok {
			execEntry.Routes = func(api.ProviderSpec) error { return router.Routes() }
		}
	}
	return []registry.Entry{
		{Name: local.Name, Runtimes: []string{cmp.Or(in.LocalRuntime, "process")}, Catalog: catalog(local.Catalog()), Provisions: true, CanStop: true, New: fixed(in.Local),
			Routes: func(api.ProviderSpec) error { return localRoutes(in.Local) }},
		{Name: dockerprovider.Name, Runtimes: []string{dockerrt.Name}, Catalog: catalog(dockerprovider.Catalog()), Provisions: true, CanStop: true, New: fixed(in.Docker)},
		execEntry,
		external.Entry(),
	}
}

// localRoutes: the local provider routes machines' /24s when its machines
// sit in network namespaces on a bridge of the host (it plays the VPC).
func localRoutes(p provisioner.Provisioner) error {
	if p == nil {
		return nil // described only (offline validation): the server checks
	}
	router, ok := p.(interface{ Routes() error })
	if !ok {
		return errors.New("the local provider routes machines' /24s only with its machines in network namespaces (gantry server --local-netns-bridge)")
	}
	return router.Routes()
}

// execFile is the exec provider's settings file (YAML or JSON).
type execFile struct {
	Commands      execprov.Commands          `json:"commands"`
	Shell         string                     `json:"shell"`
	Timeout       string                     `json:"timeout"`
	InstanceTypes []provisioner.InstanceType `json:"instanceTypes"`
	Zones         []string                   `json:"zones"`
	FlatPrice     float64                    `json:"flatPrice"`
	// Runtime is what the machines' agents run replicas with (docker or
	// process): the server plans with it before they report, and scripts
	// that start the agent read it as {{agent_runtime}}. Default: the
	// agent block's, else docker.
	Runtime string `json:"runtime"`
	// Agent, when set, renders each machine's cloud-init user data, which
	// downloads the cluster's spec.agent.binaries.
	Agent *struct {
		Runtime   string   `json:"runtime"`
		ExtraArgs []string `json:"extraArgs"`
	} `json:"agent"`
}

// decodeStrict reads YAML or JSON into v by its JSON field names,
// rejecting unknown fields.
func decodeStrict(data []byte, v any) error {
	var doc any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return err
	}
	asJSON, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(asJSON))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// loadExec reads the exec provider's settings, rejecting unknown fields;
// it returns the provider and its machines' agent runtime.
func loadExec(path, stateDir string) (*execprov.Provider, string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("--exec-config: %w", err)
	}
	var f execFile
	if err := decodeStrict(data, &f); err != nil {
		return nil, "", fmt.Errorf("--exec-config %s: %w", path, err)
	}
	cfg := execprov.Config{Commands: f.Commands, Shell: f.Shell, InstanceTypes: f.InstanceTypes, Zones: f.Zones, FlatPrice: f.FlatPrice, StateDir: stateDir}
	if f.Timeout != "" {
		if cfg.Timeout, err = time.ParseDuration(f.Timeout); err != nil {
			return nil, "", fmt.Errorf("--exec-config %s: timeout: %w", path, err)
		}
	}
	if err := (cloudinit.Agent{Runtime: f.Runtime}).Validate(); err != nil {
		return nil, "", fmt.Errorf("--exec-config %s: %s", path, strings.Replace(err.Error(), "agent.runtime", "runtime", 1))
	}
	runtime := f.Runtime
	if f.Agent != nil {
		agent := cloudinit.Agent{Runtime: cmp.Or(f.Agent.Runtime, f.Runtime), ExtraArgs: f.Agent.ExtraArgs}
		if err := agent.Validate(); err != nil {
			return nil, "", fmt.Errorf("--exec-config %s: %w", path, err)
		}
		if f.Runtime != "" && f.Agent.Runtime != "" && f.Runtime != f.Agent.Runtime {
			return nil, "", fmt.Errorf("--exec-config %s: runtime %q and agent.runtime %q disagree", path, f.Runtime, f.Agent.Runtime)
		}
		runtime = agent.Runtime
		cfg.UserData = func(spec provisioner.LaunchSpec) (string, error) {
			return cloudinit.Render(spec.Bootstrap, agent, cloudinit.Machine{Zone: spec.Zone})
		}
	}
	cfg.AgentRuntime = cmp.Or(runtime, dockerrt.Name)
	p, err := execprov.New(cfg)
	if err != nil {
		return nil, "", fmt.Errorf("--exec-config %s: %w", path, err)
	}
	return p, runtime, nil
}
