// Package docker is the provider whose machines are containers on one
// Docker Engine: each machine is a container running `gantry agent` on a
// user-defined bridge network, limited to its instance type's CPU and
// memory, with the provider's tags as container labels.
//
// Its agents run replicas as sibling containers on the same engine (the
// machine container mounts the engine's socket), labeled with their
// machine and removed with it. Siblings rather than processes inside the
// machine container, because then replicas are real containers with their
// own image and limits, images built on the host are visible to every
// machine without a registry, and no privileged Docker-in-Docker is needed.
//
// Terminated machines are remembered in a small state file for an hour, as
// a cloud lists terminated instances for a while.
package docker

import (
	"archive/tar"
	"bytes"
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gantry-dev/gantry/internal/randid"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/provisioner"
	dockerrt "github.com/gantry-dev/gantry/runtime/docker"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// Name is the provider's name in cluster specs.
const Name = "docker"

// Labels the provider adds to machine containers besides the tags.
const (
	labelKind         = "gantry.dev/kind"
	kindMachine       = "machine"
	labelInstanceType = "gantry.dev/instance-type"
	labelCapacityType = "gantry.dev/capacity-type"
	labelLaunchKey    = "gantry.dev/idempotency-key"
)

// Config tunes the provider.
type Config struct {
	// Host is the engine's address (default: $DOCKER_HOST or the socket).
	Host string
	// SocketPath is the engine socket mounted into machines for their
	// agents' docker runtime.
	SocketPath string
	// Network is the user-defined bridge network machines and replicas
	// join; created when missing.
	Network string
	// Image is the machine image; built FROM scratch from AgentBinary
	// when missing or stale.
	Image       string
	AgentBinary string
	// HAProxy is the host's HAProxy executable, copied into the machine
	// image (with its libraries) so edge machines serve the cluster's
	// exposed ports; "" builds machines without one.
	HAProxy string
	// ServerURL is what agents dial; by default the server's advertised
	// URL with a loopback host replaced by the network's gateway.
	ServerURL string
	// StateDir keeps terminated machines' records.
	StateDir string
	// StopGrace is how long a machine's agent has to stop its replicas.
	StopGrace time.Duration
	// RequestTimeout bounds each engine call.
	RequestTimeout time.Duration
	// TerminatedRetention is how long a terminated machine is still
	// described and listed.
	TerminatedRetention time.Duration
	// AgentArgs are extra flags for every agent.
	AgentArgs []string
	// SecretsDir is a directory on a tmpfs of this host: each machine's
	// agent keeps its replicas' secret files in <SecretsDir>/<instance>,
	// bind-mounted into it at the same path (the engine mounts them into
	// replica containers from the host's view).
	SecretsDir string
	Logger     *slog.Logger
}

// DefaultConfig returns the defaults for a state directory.
func DefaultConfig(stateDir string) Config {
	return Config{
		SocketPath: "/var/run/docker.sock", Network: "gantry", Image: "gantry:dev", StateDir: stateDir,
		StopGrace: 10 * time.Second, RequestTimeout: 30 * time.Second, TerminatedRetention: time.Hour, SecretsDir: dockerrt.DefaultSecretsDir,
	}
}

// secretsDir is where a machine's agent keeps its replicas' secret files.
func (p *Provider) secretsDir(instance string) string {
	return filepath.Join(cmp.Or(p.cfg.SecretsDir, dockerrt.DefaultSecretsDir), instance)
}

// Provider is the docker provisioner.
type Provider struct {
	cfg Config
	provisioner.Catalog
	cli *client.Client

	mu      sync.Mutex
	gateway string // set once the network and image are ready
	gone    map[string]tombstone
}

var _ provisioner.Provisioner = (*Provider)(nil)

// New prepares the provider; the engine is first contacted on first use.
func New(cfg Config) (*Provider, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cli, err := dockerrt.NewClient(cfg.Host)
	if err != nil {
		return nil, err
	}
	p := &Provider{cfg: cfg, Catalog: provisioner.Catalog{Types: Catalog()}, cli: cli, gone: map[string]tombstone{}}
	if err := p.load(); err != nil {
		return nil, err
	}
	return p, nil
}

// Name implements provisioner.Provisioner.
func (p *Provider) Name() string { return Name }

// Prepare creates the network (if missing) and builds the machine image
// (if missing or stale), and returns the network's gateway address: the
// host as machines see it.
func (p *Provider) Prepare(ctx context.Context) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gateway != "" {
		return p.gateway, nil
	}
	gw, err := EnsureNetwork(ctx, p.cli, p.cfg.Network)
	if err != nil {
		return "", classify("prepare", err)
	}
	binary := p.cfg.AgentBinary
	if binary == "" {
		if binary, err = os.Executable(); err != nil {
			return "", fmt.Errorf("find the gantry binary for the machine image: %w", err)
		}
	}
	var extras []string
	if p.cfg.HAProxy != "" {
		extras = append(extras, p.cfg.HAProxy)
	}
	if err := dockerrt.EnsureImage(ctx, p.cli, p.cfg.Image, binary, extras...); err != nil {
		return "", classify("prepare", err)
	}
	p.gateway = gw
	return gw, nil
}

// EnsureNetwork creates a bridge network unless it exists, and returns its
// gateway address.
func EnsureNetwork(ctx context.Context, cli *client.Client, name string) (string, error) {
	inspected, err := cli.NetworkInspect(ctx, name, client.NetworkInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		if _, err := cli.NetworkCreate(ctx, name, client.NetworkCreateOptions{Driver: "bridge",
			Labels: map[string]string{provisioner.TagManagedBy: provisioner.ManagedByValue}}); err != nil && !cerrdefs.IsConflict(err) {
			return "", fmt.Errorf("create network %s: %w", name, err)
		}
		inspected, err = cli.NetworkInspect(ctx, name, client.NetworkInspectOptions{})
	}
	if err != nil {
		return "", fmt.Errorf("inspect network %s: %w", name, err)
	}
	for _, c := range inspected.Network.IPAM.Config {
		if c.Gateway.IsValid() {
			return c.Gateway.String(), nil
		}
	}
	return "", fmt.Errorf("network %s has no IPv4 gateway", name)
}

// Launch creates and starts a machine container and returns it pending
// (its agent has yet to join). A retried launch with the same key returns
// the same machine.
func (p *Provider) Launch(ctx context.Context, spec provisioner.LaunchSpec) (*provisioner.Instance, error) {
	it, err := p.CheckLaunch(spec)
	if err != nil {
		return nil, err
	}
	if spec.Zone != "" && spec.Zone != Zone {
		return nil, provisioner.Errorf(provisioner.KindInsufficientCapacity, "launch", "zone %q: the docker provider has only %s", spec.Zone, Zone)
	}
	gateway, err := p.Prepare(ctx)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.RequestTimeout)
	defer cancel()
	if existing, err := p.list(ctx, map[string]string{labelLaunchKey: spec.IdempotencyKey}); err != nil {
		return nil, classify("launch", err)
	} else if len(existing) > 0 {
		return &existing[0], nil
	}
	id := "gantry-machine-" + randid.Hex(5)
	serverURL, err := p.agentServerURL(spec.Bootstrap.ServerURL, gateway)
	if err != nil {
		return nil, provisioner.Errorf(provisioner.KindInvalid, "launch", "%v", err)
	}
	cfg, host := p.machineConfig(id, it, spec, serverURL, gateway)
	created, err := p.cli.ContainerCreate(ctx, client.ContainerCreateOptions{Name: id, Config: cfg, HostConfig: host})
	if err != nil {
		return nil, classify("launch", err)
	}
	if err := p.copyJoinToken(ctx, created.ID, spec.Bootstrap.JoinToken); err != nil {
		p.removeContainer(created.ID)
		return nil, classify("launch", err)
	}
	if _, err := p.cli.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		p.removeContainer(created.ID)
		return nil, classify("launch", err)
	}
	inst := provisioner.Instance{ID: id, State: provisioner.StatePending, InstanceType: it.Name,
		CapacityType: cmp.Or(spec.CapacityType, api.CapacityOnDemand), Zone: Zone, LaunchedAt: time.Now().UTC(), Tags: maps.Clone(spec.Tags)}
	return &inst, nil
}

// agentServerURL is the server URLs (comma-separated) as machines reach
// them: a loopback host means this host, which containers reach at the
// network's gateway.
func (p *Provider) agentServerURL(advertised, gateway string) (string, error) {
	if p.cfg.ServerURL != "" {
		return p.cfg.ServerURL, nil
	}
	var out []string
	for _, one := range strings.Split(advertised, ",") {
		u, err := url.Parse(strings.TrimSpace(one))
		if err != nil || u.Host == "" {
			return "", fmt.Errorf("server URL %q: not a URL", one)
		}
		if addr, err := netip.ParseAddr(u.Hostname()); (err == nil && addr.IsLoopback()) || u.Hostname() == "localhost" {
			u.Host = gateway + ":" + u.Port()
		}
		out = append(out, u.String())
	}
	return strings.Join(out, ","), nil
}

func (p *Provider) machineConfig(id string, it provisioner.InstanceType, spec provisioner.LaunchSpec, serverURL, gateway string) (*container.Config, *container.HostConfig) {
	labels := maps.Clone(spec.Tags)
	labels[labelKind], labels[labelInstanceType] = kindMachine, it.Name
	labels[labelCapacityType], labels[labelLaunchKey] = cmp.Or(spec.CapacityType, api.CapacityOnDemand), spec.IdempotencyKey
	b := spec.Bootstrap
	args := []string{"agent", "--server", serverURL, "--cluster", b.Cluster, "--group", b.Group, "--machine-id", b.MachineID,
		"--provider-id", id, "--zone", Zone, "--data-dir", "/var/lib/gantry", "--runtime", dockerrt.Name,
		"--docker-network", p.cfg.Network, "--address", gateway, "--join-token-file", joinTokenPath, "--docker-secrets-dir", p.secretsDir(id),
		"--cpu", api.FormatCPU(it.MilliCPU), "--memory", strconv.FormatInt(it.MemoryBytes, 10),
		"--ephemeral-storage", strconv.FormatInt(it.EphemeralBytes, 10),
		// Names answered at its own address, which its host (gantry dev's
		// resolver line) reaches; its loopback it does not.
		"--dns-listen", "auto:0"}
	if b.TemplateVersion != "" {
		args = append(args, "--template-version", b.TemplateVersion)
	}
	args = append(args, p.cfg.AgentArgs...)
	cfg := &container.Config{Image: p.cfg.Image, Cmd: args, Labels: labels, Hostname: id}
	host := &container.HostConfig{
		NetworkMode: container.NetworkMode(p.cfg.Network),
		Binds:       []string{p.cfg.SocketPath + ":/var/run/docker.sock", p.secretsDir(id) + ":" + p.secretsDir(id)},
		Resources:   container.Resources{NanoCPUs: it.MilliCPU * 1_000_000, Memory: it.MemoryBytes},
	}
	if b.NetworkMode == api.NetworkOverlay {
		overlayMachine(cfg, host)
	} else {
		// Its replica containers share its network: they reach its
		// resolver at its own address there.
		cfg.Cmd = append(cfg.Cmd, "--container-dns", "auto")
	}
	return cfg, host
}

// overlayMachine lets a machine container join its cluster's mesh and put
// its replica containers on its bridge: a TUN device and the right to
// configure networks (WireGuard), forwarding between the bridge and the
// mesh, and the host's pids with the right to enter a replica's network
// namespace (the agent plumbs each replica container as a CNI plugin
// would; the engine reports replicas by their host pids). The mesh
// endpoint is the container's own address, not the host's where its
// replicas' ports were published.
func overlayMachine(cfg *container.Config, host *container.HostConfig) {
	cfg.Cmd = append(cfg.Cmd, "--mesh-address", "auto")
	host.CapAdd = []string{"NET_ADMIN", "SYS_ADMIN"}
	host.PidMode = "host"
	host.Devices = []container.DeviceMapping{{PathOnHost: "/dev/net/tun", PathInContainer: "/dev/net/tun", CgroupPermissions: "rwm"}}
	host.Sysctls = map[string]string{"net.ipv4.ip_forward": "1"}
}

const joinTokenPath = "/etc/gantry/join-token"

// copyJoinToken puts the token in the machine's filesystem (mode 0600)
// before it starts: never in its arguments, environment or labels, which
// `docker inspect` shows.
func (p *Provider) copyJoinToken(ctx context.Context, id, token string) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range []*tar.Header{
		{Name: "etc/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "etc/gantry/", Typeflag: tar.TypeDir, Mode: 0o700},
	} {
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Name: joinTokenPath[1:], Mode: 0o600, Size: int64(len(token))}); err != nil {
		return err
	}
	if _, err := tw.Write([]byte(token)); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if _, err := p.cli.CopyToContainer(ctx, id, client.CopyToContainerOptions{DestinationPath: "/", Content: &buf}); err != nil {
		return fmt.Errorf("copy join token into the machine: %w", err)
	}
	return nil
}

func (p *Provider) removeContainer(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.RequestTimeout)
	defer cancel()
	_, _ = p.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true})
}

// networkAddress is the container's address on the provider's network.
func networkAddress(settings *container.NetworkSettings, name string) []string {
	if settings == nil {
		return nil
	}
	if ep, ok := settings.Networks[name]; ok && ep != nil && ep.IPAddress.IsValid() {
		return []string{ep.IPAddress.String()}
	}
	return nil
}

func (p *Provider) statePath() string { return filepath.Join(p.cfg.StateDir, "terminated.json") }
