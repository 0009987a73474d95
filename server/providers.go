package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/fleet"
	dockerprovider "github.com/gantry-dev/gantry/provider/docker"
	execprov "github.com/gantry-dev/gantry/provider/exec"
	"github.com/gantry-dev/gantry/provider/local"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/provisioner/cloudinit"
	dockerrt "github.com/gantry-dev/gantry/runtime/docker"
	"go.yaml.in/yaml/v3"
)

// prepareProviders makes the built-in providers with server-wide settings;
// none contacts anything until the first cluster uses it. Providers with
// per-cluster settings (a cloud region) are made on first use by New.
func (s *Server) prepareProviders(exe string) error {
	if s.cfg.LocalRuntime == "" {
		s.cfg.LocalRuntime = "process"
	}
	var err error
	localCfg := local.Config{
		AgentBinary: exe, StateDir: filepath.Join(s.cfg.DataDir, "local"), StopGrace: s.cfg.LocalStopGrace,
		ExitWithServer: s.cfg.LocalExitWithServer, AgentArgs: append([]string{"--runtime", s.cfg.LocalRuntime}, s.cfg.LocalAgentArgs...), Logger: s.log,
	}
	if s.cfg.LocalRuntime == dockerrt.Name {
		// A killed agent's containers outlive it; they go with its machine.
		cli, err := dockerrt.NewClient(s.cfg.Docker.Host)
		if err != nil {
			return err
		}
		localCfg.ReleaseMachine = func(ctx context.Context, machineID string) error { return dockerrt.RemoveReplicas(ctx, cli, machineID) }
	}
	if s.local, err = local.New(localCfg); err != nil {
		return err
	}
	runtimes := map[string][]string{}
	for k, v := range s.cfg.Controller.ProviderRuntimes {
		runtimes[k] = v
	}
	runtimes[local.Name] = []string{s.cfg.LocalRuntime}
	s.cfg.Controller.ProviderRuntimes = runtimes
	dc := s.cfg.Docker
	if dc.StateDir == "" {
		dc.StateDir = filepath.Join(s.cfg.DataDir, "docker")
	}
	if dc.AgentBinary == "" {
		dc.AgentBinary = exe
	}
	dc.Logger = s.log
	if s.docker, err = dockerprovider.New(dc); err != nil {
		return err
	}
	if s.cfg.ExecConfig != "" {
		if s.exec, err = loadExec(s.cfg.ExecConfig, filepath.Join(s.cfg.DataDir, "exec")); err != nil {
			return err
		}
	}
	s.providers = fleet.NewProviders(s, s.cfg.WrapProvider)
	return nil
}

// available names the providers a cluster may use on this server.
func (s *Server) available() []string {
	names := []string{local.Name, dockerprovider.Name}
	if s.cfg.Clouds != nil {
		names = append(names, s.cfg.Clouds.Names()...)
	}
	if s.exec != nil {
		names = append(names, execprov.Name)
	}
	sort.Strings(names)
	return names
}

// Key implements fleet.ProviderFactory: which provider instance a
// cluster's provider settings need.
func (s *Server) Key(p api.ProviderSpec) (string, error) {
	switch p.Name {
	case local.Name, dockerprovider.Name:
		return p.Name, nil
	case execprov.Name:
		if s.exec == nil {
			return "", fmt.Errorf("provider exec is not configured on this server (start it with --exec-config FILE)")
		}
		return p.Name, nil
	}
	if s.cfg.Clouds != nil {
		if key, ok, err := s.cfg.Clouds.Key(p); ok {
			return key, err
		}
	}
	return "", fmt.Errorf("provider %q is not available on this server (available: %s)", p.Name, strings.Join(s.available(), ", "))
}

// New implements fleet.ProviderFactory.
func (s *Server) New(key string) (provisioner.Provisioner, error) {
	switch key {
	case local.Name:
		return s.local, nil
	case dockerprovider.Name:
		return s.docker, nil
	case execprov.Name:
		if s.exec != nil {
			return s.exec, nil
		}
	}
	if s.cfg.Clouds != nil {
		if prov, ok, err := s.cfg.Clouds.Make(key); ok {
			return prov, err
		}
	}
	return nil, fmt.Errorf("provider %q is not available on this server", key)
}

// Catalogs resolves a provider's catalog by name, for spec validation.
func (s *Server) Catalogs(name string) ([]provisioner.InstanceType, bool) {
	if s.cfg.Clouds != nil {
		if types, ok := s.cfg.Clouds.Catalog(api.ProviderSpec{Name: name}); ok {
			return types, true
		}
	}
	key, err := s.Key(api.ProviderSpec{Name: name})
	if err != nil {
		return nil, false
	}
	p, err := s.providers.Get(key)
	if err != nil {
		return nil, false
	}
	return p.InstanceTypes(), true
}

// execFile is the exec provider's settings file (YAML or JSON).
type execFile struct {
	Commands      execprov.Commands          `json:"commands"`
	Shell         string                     `json:"shell"`
	Timeout       string                     `json:"timeout"`
	InstanceTypes []provisioner.InstanceType `json:"instanceTypes"`
	Zones         []string                   `json:"zones"`
	FlatPrice     float64                    `json:"flatPrice"`
	// Agent, when set, renders each machine's cloud-init user data.
	Agent *struct {
		Binaries  map[string]cloudinit.Binary `json:"binaries"`
		Runtime   string                      `json:"runtime"`
		ExtraArgs []string                    `json:"extraArgs"`
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

// loadExec reads the exec provider's settings, rejecting unknown fields.
func loadExec(path, stateDir string) (*execprov.Provider, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--exec-config: %w", err)
	}
	var f execFile
	if err := decodeStrict(data, &f); err != nil {
		return nil, fmt.Errorf("--exec-config %s: %w", path, err)
	}
	cfg := execprov.Config{Commands: f.Commands, Shell: f.Shell, InstanceTypes: f.InstanceTypes, Zones: f.Zones, FlatPrice: f.FlatPrice, StateDir: stateDir}
	if f.Timeout != "" {
		if cfg.Timeout, err = time.ParseDuration(f.Timeout); err != nil {
			return nil, fmt.Errorf("--exec-config %s: timeout: %w", path, err)
		}
	}
	if f.Agent != nil {
		agent := cloudinit.Agent{Binaries: f.Agent.Binaries, Runtime: f.Agent.Runtime, ExtraArgs: f.Agent.ExtraArgs}
		if err := agent.Validate(); err != nil {
			return nil, fmt.Errorf("--exec-config %s: %w", path, err)
		}
		cfg.UserData = func(spec provisioner.LaunchSpec) (string, error) {
			return cloudinit.Render(spec.Bootstrap, agent, cloudinit.Machine{Zone: spec.Zone})
		}
	}
	p, err := execprov.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("--exec-config %s: %w", path, err)
	}
	return p, nil
}
