// Package docker is the runtime driver that runs replicas as containers on
// Docker Engine, through the Engine API (never the docker CLI). It works
// with the engine Debian ships (API 1.41).
//
// Each replica is one container named after its machine and replica and
// labeled with both, so a restarted agent adopts its containers instead of
// starting duplicates. Ports are published on host ports the engine picks.
// Restarts are the agent's (restart policy "no"): a crashed container is
// removed and created again with backoff.
package docker

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/gantry-dev/gantry/runtime"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"
)

// Name is the runtime's name in inventories.
const Name = "docker"

// Config tunes the driver.
type Config struct {
	// Host is the engine's address (default: $DOCKER_HOST, else the local
	// socket).
	Host string
	// Network is what replica containers join ("bridge" by default; the
	// docker provider uses its own network).
	Network string
	// PublishIP is the host address ports are published on ("" = all).
	PublishIP string
	// PullTimeout bounds pulling an image that is not present.
	PullTimeout time.Duration
	// RequestTimeout bounds each short engine call (create, inspect...).
	RequestTimeout time.Duration
	// PortWait bounds how long a started container's published ports are
	// waited for, checking every PortPoll.
	PortWait time.Duration
	PortPoll time.Duration
	// SecretsDir is a directory on a tmpfs of the engine's host where each
	// replica's secret files are written and bind-mounted (read-only) at
	// runtime.SecretDir: never on disk, never in the container's config.
	SecretsDir string
	// PreviousLogsDir keeps the end of each removed container's output
	// (PreviousLogBytes) for logs --previous ("": none is kept).
	PreviousLogsDir  string
	PreviousLogBytes int64
	// Attacher, when set, puts replicas that have an address of their own
	// (overlay clusters) on the machine's bridge at that address; without
	// it every replica joins Network and publishes its ports.
	Attacher runtime.NetworkAttacher
}

// DefaultSecretsDir is on the host's /dev/shm.
const DefaultSecretsDir = "/dev/shm/gantry-secrets"

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{Network: "bridge", PullTimeout: 5 * time.Minute, RequestTimeout: 30 * time.Second, PortWait: 10 * time.Second, PortPoll: 100 * time.Millisecond,
		SecretsDir: DefaultSecretsDir, PreviousLogBytes: runtime.DefaultPreviousLogBytes}
}

// Driver runs containers.
type Driver struct {
	cfg Config
	cli *client.Client

	mu       sync.Mutex
	features *engineFeatures
}

var (
	_ runtime.Driver        = (*Driver)(nil)
	_ runtime.Adopter       = (*Driver)(nil)
	_ runtime.LogReader     = (*Driver)(nil)
	_ runtime.RuntimeLister = (*Driver)(nil)
	_ runtime.SecretFiler   = (*Driver)(nil)
	_ runtime.AddressGiver  = (*Driver)(nil)
)

// GivesAddresses implements runtime.AddressGiver: with an attacher, each
// replica with an address listens at it in a namespace of its own.
func (d *Driver) GivesAddresses() bool { return d.cfg.Attacher != nil }

// SecretFiles implements runtime.SecretFiler.
func (d *Driver) SecretFiles() bool { return true }

// New connects lazily: no engine call is made until the first use.
func New(cfg Config) (*Driver, error) {
	cli, err := NewClient(cfg.Host)
	if err != nil {
		return nil, err
	}
	return &Driver{cfg: cfg, cli: cli}, nil
}

// NewClient returns an Engine API client for host ("" = from environment),
// negotiating the API version down to the engine's.
func NewClient(host string) (*client.Client, error) {
	opts := []client.Opt{client.FromEnv, client.WithUserAgent("gantry")}
	if host != "" {
		opts = append(opts, client.WithHost(host))
	}
	cli, err := client.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	return cli, nil
}

// Name implements runtime.Driver.
func (d *Driver) Name() string { return Name }

// Close releases the client.
func (d *Driver) Close() error { return d.cli.Close() }

// Runtimes reports "docker" and the engine's TEE sandbox runtimes.
func (d *Driver) Runtimes(ctx context.Context) ([]string, error) {
	info, err := d.cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		return []string{Name}, fmt.Errorf("docker info: %w", err)
	}
	out := []string{Name}
	for _, name := range sortedKeys(info.Info.Runtimes) {
		if runtime.IsTEE(name) {
			out = append(out, name)
		}
	}
	return out, nil
}

// engineFeatures asks the engine once what it offers.
func (d *Driver) engineFeatures(ctx context.Context) (engineFeatures, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.features != nil {
		return *d.features, nil
	}
	info, err := d.cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		return engineFeatures{}, fmt.Errorf("docker info: %w", err)
	}
	f := engineFeatures{}
	for _, name := range sortedKeys(info.Info.Runtimes) {
		if runtime.IsTEE(name) && f.TEERuntime == "" {
			f.TEERuntime = name
		}
	}
	switch info.Info.Driver {
	case "btrfs", "zfs":
		f.StorageQuota = true
	case "overlay2":
		for _, kv := range info.Info.DriverStatus {
			if kv[0] == "Backing Filesystem" && kv[1] == "xfs" {
				f.StorageQuota = true
			}
		}
	}
	d.features = &f
	return f, nil
}

// Start makes sure the image is present (pulling it if not), replaces any
// leftover container of the same name, and creates and starts the
// replica's container.
func (d *Driver) Start(ctx context.Context, s runtime.Spec) (runtime.Task, error) {
	features, err := d.engineFeatures(ctx)
	if err != nil {
		return nil, err
	}
	cfg, host, err := containerConfig(s, d.cfg.Network, d.cfg.PublishIP, features)
	if err != nil {
		return nil, err
	}
	if s.DNS != "" {
		if err := withResolver(cfg, host, s.DNS); err != nil {
			return nil, err
		}
	}
	var addr netip.Addr
	if s.Address != "" && d.cfg.Attacher != nil {
		if addr, err = netip.ParseAddr(s.Address); err != nil {
			return nil, fmt.Errorf("replica address %q: %w", s.Address, err)
		}
		if err := onOwnAddress(cfg, host, s, d.cfg.Attacher.Gateway(addr)); err != nil {
			return nil, err
		}
	}
	if err := d.ensureImage(ctx, s.Image); err != nil {
		return nil, err
	}
	name := ContainerName(s.MachineID, s.ReplicaID)
	rctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	defer cancel()
	if err := d.keepPrevious(rctx, name, name); err != nil {
		return nil, err
	}
	if _, err := d.cli.ContainerRemove(rctx, name, client.ContainerRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
		return nil, fmt.Errorf("remove leftover container %s: %w", name, err)
	}
	if len(s.SecretFiles) > 0 {
		dir, err := writeSecretFiles(d.cfg.SecretsDir, name, s.SecretFiles)
		if err != nil {
			return nil, err
		}
		host.Mounts = append(host.Mounts, mount.Mount{Type: mount.TypeBind, Source: dir, Target: runtime.SecretDir, ReadOnly: true})
	}
	created, err := d.cli.ContainerCreate(rctx, client.ContainerCreateOptions{Name: name, Config: cfg, HostConfig: host})
	if err != nil {
		removeSecretFiles(d.cfg.SecretsDir, name)
		return nil, fmt.Errorf("create container: %w", err)
	}
	if _, err := d.cli.ContainerStart(rctx, created.ID, client.ContainerStartOptions{}); err != nil {
		d.remove(created.ID)
		removeSecretFiles(d.cfg.SecretsDir, name)
		return nil, fmt.Errorf("start container: %w", err)
	}
	if addr.IsValid() {
		if err := d.plumb(rctx, created.ID, addr); err != nil {
			d.remove(created.ID)
			removeSecretFiles(d.cfg.SecretsDir, name)
			return nil, err
		}
	}
	return d.attach(ctx, created.ID)
}

// plumb puts a started container on the machine's bridge at addr. Its
// process runs from the start without the address for the moment this
// takes; it is not in any answer before its health check passes.
func (d *Driver) plumb(ctx context.Context, id string, addr netip.Addr) error {
	inspected, err := d.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return fmt.Errorf("inspect container: %w", err)
	}
	c := inspected.Container
	if c.State == nil || c.State.Pid == 0 {
		return fmt.Errorf("container exited before it got its address %s", addr)
	}
	if err := d.cfg.Attacher.Attach(c.State.Pid, addr); err != nil {
		return fmt.Errorf("give the container its address %s: %w", addr, err)
	}
	return nil
}

// ensureImage pulls the image unless the engine has it. A pull that fails
// says why (no registry, no such image), for the replica's status.
func (d *Driver) ensureImage(ctx context.Context, image string) error {
	if _, err := d.cli.ImageInspect(ctx, image); err == nil {
		return nil
	} else if !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("inspect image %s: %w", image, err)
	}
	ctx, cancel := context.WithTimeout(ctx, d.cfg.PullTimeout)
	defer cancel()
	resp, err := d.cli.ImagePull(ctx, image, client.ImagePullOptions{})
	if err != nil {
		return fmt.Errorf("image %s is not present and pulling it failed: %w", image, err)
	}
	defer resp.Close()
	if err := resp.Wait(ctx); err != nil {
		return fmt.Errorf("image %s is not present and pulling it failed: %w", image, err)
	}
	return nil
}

// attach wraps an existing container in a task that notices its exit.
func (d *Driver) attach(ctx context.Context, id string) (*task, error) {
	rctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	defer cancel()
	// Wait before inspecting: an exit between the two is not missed.
	waitCtx, stopWait := context.WithCancel(context.WithoutCancel(ctx))
	wait := d.cli.ContainerWait(waitCtx, id, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
	c, err := d.inspectPublished(rctx, id)
	if err != nil {
		stopWait()
		return nil, err
	}
	t := &task{driver: d, id: id, name: strings.TrimPrefix(c.Name, "/"), done: make(chan struct{}), stopWait: stopWait,
		hostPorts: publishedPorts(c), endpoints: endpoints(c, d.cfg.Network)}
	if addr, ok := ownAddress(c); ok {
		t.hostPorts, t.endpoints = containerPorts(c.Config.Labels), map[string]string{}
		for name, cp := range t.hostPorts {
			t.endpoints[name] = net.JoinHostPort(addr.String(), strconv.Itoa(cp))
		}
	}
	go t.watch(wait)
	return t, nil
}

// inspectPublished inspects a container until each of its named ports has
// its host port (the engine may fill them in just after start), or it is
// no longer running, or PortWait has passed.
func (d *Driver) inspectPublished(ctx context.Context, id string) (container.InspectResponse, error) {
	deadline := time.Now().Add(d.cfg.PortWait)
	for {
		inspected, err := d.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
		if err != nil {
			return container.InspectResponse{}, fmt.Errorf("inspect container: %w", err)
		}
		c := inspected.Container
		running := c.State != nil && c.State.Running
		_, onBridge := ownAddress(c) // publishes nothing
		if !running || onBridge || c.Config == nil || len(publishedPorts(c)) == len(containerPorts(c.Config.Labels)) || time.Now().After(deadline) {
			return c, nil
		}
		select {
		case <-ctx.Done():
			return c, nil
		case <-time.After(d.cfg.PortPoll):
		}
	}
}

// ownAddress is the address of a container on its machine's bridge.
func ownAddress(c container.InspectResponse) (netip.Addr, bool) {
	if c.Config == nil {
		return netip.Addr{}, false
	}
	addr, err := netip.ParseAddr(c.Config.Labels[LabelAddress])
	return addr, err == nil
}

// Adopt finds the replica containers this machine left behind.
func (d *Driver) Adopt(ctx context.Context, machineID string) ([]runtime.Adopted, error) {
	list, err := d.cli.ContainerList(ctx, client.ContainerListOptions{All: true,
		Filters: ReplicasOf(machineID)})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	var out []runtime.Adopted
	for _, c := range list.Items {
		if addr, err := netip.ParseAddr(c.Labels[LabelAddress]); err == nil && d.cfg.Attacher != nil && c.State == container.StateRunning {
			// Attached already unless the machine's namespace is new.
			if err := d.plumb(ctx, c.ID, addr); err != nil {
				return nil, err
			}
		}
		t, err := d.attach(ctx, c.ID)
		if cerrdefs.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, runtime.Adopted{ReplicaID: c.Labels[LabelReplica], SpecHash: c.Labels[LabelSpecHash], Task: t})
	}
	return out, nil
}

// ReplicasOf selects the replica containers of a machine.
func ReplicasOf(machineID string) client.Filters {
	return make(client.Filters).Add("label", LabelManagedBy+"="+managedByValue, LabelKind+"="+KindReplica, LabelMachine+"="+machineID)
}

// RemoveReplicas force-removes every replica container of a machine (the
// machine is gone, and so is anyone to stop them gracefully), and their
// secret files under secretsDir (its agent's --docker-secrets-dir).
func RemoveReplicas(ctx context.Context, cli *client.Client, machineID, secretsDir string) error {
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: ReplicasOf(machineID)})
	if err != nil {
		return fmt.Errorf("list replica containers of %s: %w", machineID, err)
	}
	for _, c := range list.Items {
		if _, err := cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
			return fmt.Errorf("remove replica container %s: %w", c.ID, err)
		}
		for _, name := range c.Names {
			removeSecretFiles(secretsDir, strings.TrimPrefix(name, "/"))
		}
	}
	return nil
}

// Logs streams a replica's container output (stdout and stderr).
func (d *Driver) Logs(ctx context.Context, machineID, replicaID string, opts runtime.LogOptions) (io.ReadCloser, error) {
	if opts.Previous {
		return d.previousLogs(machineID, replicaID)
	}
	tail := "all"
	if opts.Tail >= 0 {
		tail = fmt.Sprint(opts.Tail)
	}
	rc, err := d.cli.ContainerLogs(ctx, ContainerName(machineID, replicaID), client.ContainerLogsOptions{
		ShowStdout: true, ShowStderr: true, Follow: opts.Follow, Tail: tail})
	if cerrdefs.IsNotFound(err) {
		return nil, fmt.Errorf("replica %s has no container on this machine", replicaID)
	}
	if err != nil {
		return nil, fmt.Errorf("container logs: %w", err)
	}
	pr, pw := io.Pipe()
	go func() {
		_, err := stdcopy.StdCopy(pw, pw, rc)
		rc.Close()
		pw.CloseWithError(err)
	}()
	return &pipeCloser{PipeReader: pr, src: rc}, nil
}

type pipeCloser struct {
	*io.PipeReader
	src io.Closer
}

func (p *pipeCloser) Close() error {
	p.src.Close()
	return p.PipeReader.Close()
}

// publishedPorts maps each named port to the host port the engine chose.
func publishedPorts(c container.InspectResponse) map[string]int {
	out := map[string]int{}
	if c.Config == nil || c.NetworkSettings == nil {
		return out
	}
	for name, cp := range containerPorts(c.Config.Labels) {
		for port, bindings := range c.NetworkSettings.Ports {
			if int(port.Num()) != cp || len(bindings) == 0 {
				continue
			}
			var hp int
			if _, err := fmt.Sscan(bindings[0].HostPort, &hp); err == nil {
				out[name] = hp
			}
		}
	}
	return out
}

// endpoints are container IP:container port on the replica's network, which
// the agent reaches from the host or from a machine container on the same
// network.
func endpoints(c container.InspectResponse, networkName string) map[string]string {
	out := map[string]string{}
	if c.Config == nil || c.NetworkSettings == nil {
		return out
	}
	ep, ok := c.NetworkSettings.Networks[networkName]
	if !ok || !ep.IPAddress.IsValid() {
		return out
	}
	for name, cp := range containerPorts(c.Config.Labels) {
		out[name] = net.JoinHostPort(ep.IPAddress.String(), fmt.Sprint(cp))
	}
	return out
}

func (d *Driver) remove(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), d.cfg.RequestTimeout)
	defer cancel()
	_, _ = d.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true})
}
