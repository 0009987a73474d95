package cli

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/gantry-dev/gantry/agent"
	"github.com/gantry-dev/gantry/agent/bridge"
	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/internal/pki"
	"github.com/gantry-dev/gantry/internal/version"
	"github.com/gantry-dev/gantry/runtime"
	"github.com/gantry-dev/gantry/runtime/docker"
	"github.com/gantry-dev/gantry/runtime/process"
	"github.com/spf13/cobra"
)

func newAgentCmd(g *globals) *cobra.Command {
	cfg := agent.DefaultConfig()
	dockerCfg := docker.DefaultConfig()
	bridgeCfg := bridge.DefaultConfig()
	var cpu, memory, disk, runtimeName, tokenFile, providerIDFile, logFormat, logLevel string
	var labels []string
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run the machine agent: join, heartbeat, run assigned replicas",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			log, err := newLogger(os.Stderr, logFormat, logLevel)
			if err != nil {
				return err
			}
			if cfg.ServerURL == "" || cfg.Cluster == "" || cfg.DataDir == "" {
				return errors.New("--server, --cluster and --data-dir are required")
			}
			if err := parseCapacity(&cfg.Capacity, cpu, memory, disk); err != nil {
				return err
			}
			if cfg.Labels, err = parseLabels(labels); err != nil {
				return err
			}
			if cfg.JoinToken, err = joinToken(tokenFile); err != nil {
				return err
			}
			if cfg.ProviderID == "" && providerIDFile != "" {
				cfg.ProviderID = readProviderID(providerIDFile, log)
			}
			if cfg.CACertHash != "" && !pki.ValidPin(cfg.CACertHash) {
				return fmt.Errorf("--ca-cert-hash %q: want sha256: and 64 hex digits (printed by `gantry token create --kind join`)", cfg.CACertHash)
			}
			bridgeCfg.MTU = cfg.Mesh.MTU
			dockerCfg.Attacher = bridge.New(bridgeCfg)
			driver, err := newDriver(runtimeName, cfg.DataDir, dockerCfg)
			if err != nil {
				return err
			}
			cfg.Version = version.Get().Version
			err = agent.New(cfg, driver, log).Run(cmd.Context())
			if errors.Is(err, agent.ErrMachineGone) {
				log.Info("machine terminated by the server; exiting")
				return nil
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.ServerURL, "server", "", "URL of the gantry server, or the URLs of several sharing a store (comma-separated; the agent moves to the next when one stops answering)")
	f.StringVar(&cfg.Cluster, "cluster", "", "cluster to join")
	f.StringVar(&cfg.Group, "group", "", "capacity group of this machine")
	f.StringVar(&cfg.MachineID, "machine-id", "", "machine name (set by the provider that launched it)")
	f.StringVar(&cfg.ProviderID, "provider-id", "", "the provider's id of this machine")
	f.StringVar(&providerIDFile, "provider-id-file", "", "file holding the provider's id of this machine (written at boot from the cloud's metadata; ignored when absent)")
	f.StringVar(&cfg.Zone, "zone", "", "zone of this machine")
	f.StringVar(&cfg.TemplateVersion, "template-version", "", "the cluster's agent.version this machine was launched with (reported to the server)")
	f.StringVar(&cfg.Address, "address", "", "address where this machine's replicas are reachable")
	f.StringVar(&cfg.MeshAddress, "mesh-address", "", "address where the cluster's other machines reach this one's WireGuard port in an overlay cluster (default: --address; auto: the address this machine reaches the server from)")
	f.StringVar(&cfg.Mesh.Backend, "mesh-backend", cfg.Mesh.Backend, "WireGuard of an overlay cluster's mesh: auto (the kernel's where it has the module, else userspace), kernel or userspace")
	f.StringVar(&cfg.RoutedLink, "routed-link", cfg.RoutedLink, "link that holds this machine's and its process replicas' addresses in a cluster whose network routes each machine's /24 to it (network mode routed)")
	f.StringVar(&cfg.ContainerDNS, "container-dns", "", "address where replica containers in host mode reach this agent's resolver, port 53 (auto: the address this machine reaches the server from; empty: none)")
	f.StringVar(&bridgeCfg.Name, "overlay-bridge", bridgeCfg.Name, "bridge that replica containers of an overlay cluster join at their own addresses")
	f.StringVar(&cfg.DataDir, "data-dir", "", "agent state: credential, replica logs")
	f.StringVar(&runtimeName, "runtime", process.Name, "runtime driver for replicas: process or docker")
	f.StringVar(&dockerCfg.Host, "docker-host", "", "Docker Engine address (default: $DOCKER_HOST or the local socket)")
	f.StringVar(&dockerCfg.Network, "docker-network", dockerCfg.Network, "network replica containers join")
	f.StringVar(&dockerCfg.PublishIP, "docker-publish-ip", "", "host address replica ports are published on (default: all)")
	f.StringVar(&dockerCfg.SecretsDir, "docker-secrets-dir", dockerCfg.SecretsDir, "directory on a tmpfs of the engine's host where replicas' secret files are kept (bind-mounted at "+runtime.SecretDir+")")
	f.StringVar(&cpu, "cpu", "", "CPU to advertise (default: detected)")
	f.StringVar(&memory, "memory", "", "memory to advertise (default: detected)")
	f.StringVar(&disk, "ephemeral-storage", "", "ephemeral storage to advertise (default: detected)")
	f.StringArrayVar(&labels, "label", nil, "machine label key=value; repeatable")
	// What a launching provider wrote on the machine, as a cloud keeps an
	// instance's tags and type: the local provider finds its machines on
	// the host by these arguments (from any server).
	f.StringArrayVar(new([]string), "tag", nil, "provider tag key=value of this machine; repeatable (set by the provider that launched it)")
	f.StringVar(new(string), "instance-type", "", "instance type of this machine (set by the provider that launched it)")
	f.StringVar(new(string), "capacity-type", "", "capacity type of this machine (set by the provider that launched it)")
	f.StringVar(&cfg.CACertHash, "ca-cert-hash", os.Getenv("GANTRY_CA_CERT_HASH"), "pin of the server's CA, sha256:<hex> (default: the one the join token carries)")
	f.StringVar(&tokenFile, "join-token-file", "", "file with the join token (default: $GANTRY_JOIN_TOKEN)")
	f.DurationVar(&cfg.RestartBackoff, "restart-backoff", cfg.RestartBackoff, "first wait before restarting a crashed replica (doubles per crash)")
	f.DurationVar(&cfg.MaxRestartBackoff, "max-restart-backoff", cfg.MaxRestartBackoff, "longest wait between restarts")
	f.DurationVar(&cfg.RequestTimeout, "request-timeout-agent", cfg.RequestTimeout, "timeout of each call to the server")
	f.StringVar(&cfg.DNS.Listen, "dns-listen", cfg.DNS.Listen, "where to answer the cluster's names over UDP and TCP (port 0: any free port, the same as the last run's when it is free; empty: answer none)")
	f.DurationVar(&cfg.DNS.TTL, "dns-ttl", cfg.DNS.TTL, "TTL of the DNS answers")
	f.StringVar(&cfg.Ingress.Binary, "haproxy", cfg.Ingress.Binary, "HAProxy executable serving the cluster's exposed ports on an edge machine")
	f.StringVar(&cfg.Ingress.BindAddress, "ingress-address", cfg.Ingress.BindAddress, "address exposed ports listen on (default: all of the machine's)")
	f.DurationVar(&cfg.UsageInterval, "usage-interval", cfg.UsageInterval, "how often the running replicas' CPU and memory are measured, for gantry top (0: never)")
	f.DurationVar(&cfg.HeartbeatAttemptTimeout, "heartbeat-attempt-timeout", cfg.HeartbeatAttemptTimeout, "longest a heartbeat waits for one server before it tries the next")
	f.StringVar(&logFormat, "log-format", "text", "log format: text or json")
	f.StringVar(&logLevel, "log-level", "info", "log level")
	return cmd
}

func newDriver(name, dataDir string, dockerCfg docker.Config) (runtime.Driver, error) {
	switch name {
	case process.Name:
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		cfg := process.DefaultConfig(filepath.Join(dataDir, "replicas"))
		cfg.ExtraPath = filepath.Dir(exe)
		return process.New(cfg), nil
	case docker.Name:
		if dockerCfg.PreviousLogsDir == "" {
			dockerCfg.PreviousLogsDir = filepath.Join(dataDir, "previous-logs")
		}
		return docker.New(dockerCfg)
	}
	return nil, fmt.Errorf("--runtime %q: want %q or %q", name, process.Name, docker.Name)
}

// joinToken reads the token from a file or the environment, and removes it
// from the environment so replicas never inherit it.
func joinToken(file string) (string, error) {
	if file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("read join token: %w", err)
		}
		return strings.TrimSpace(string(data)), nil
	}
	token := os.Getenv("GANTRY_JOIN_TOKEN")
	os.Unsetenv("GANTRY_JOIN_TOKEN")
	return token, nil
}

func parseCapacity(r *api.Resources, cpu, memory, disk string) error {
	var err error
	if cpu != "" {
		if r.MilliCPU, err = api.ParseCPU(cpu); err != nil {
			return fmt.Errorf("--cpu: %w", err)
		}
	}
	if memory != "" {
		if r.MemoryBytes, err = api.ParseBytes(memory); err != nil {
			return fmt.Errorf("--memory: %w", err)
		}
	}
	if disk != "" {
		if r.EphemeralBytes, err = api.ParseBytes(disk); err != nil {
			return fmt.Errorf("--ephemeral-storage: %w", err)
		}
	}
	return nil
}

func parseLabels(pairs []string) (map[string]string, error) {
	out := map[string]string{}
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--label %q: want key=value", p)
		}
		out[k] = v
	}
	return out, nil
}

// readProviderID reads the instance id the boot script wrote from the
// cloud's metadata; without it the agent joins all the same (the server
// finds the instance by its tags).
func readProviderID(path string, log *slog.Logger) string {
	data, err := os.ReadFile(path)
	if err != nil {
		log.Warn("no instance id from the cloud's metadata", "file", path, "err", err)
		return ""
	}
	id := strings.TrimSpace(string(data))
	if len(id) > 256 || strings.ContainsFunc(id, func(r rune) bool { return r < ' ' || r > '~' }) {
		log.Warn("ignoring an instance id that is not printable ASCII", "file", path)
		return ""
	}
	return id
}
