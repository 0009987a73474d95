package docker

import (
	"fmt"
	"maps"
	"net"
	"net/netip"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/gantry-dev/gantry/runtime"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
)

// Labels on every replica container, so an agent (or the provider removing
// a machine) finds them again.
const (
	LabelManagedBy = "gantry.dev/managed-by"
	// LabelKind tells replica containers from machine containers (the
	// docker provider's), which carry the same machine label.
	LabelKind     = "gantry.dev/kind"
	KindReplica   = "replica"
	LabelMachine  = "gantry.dev/machine"
	LabelReplica  = "gantry.dev/replica"
	LabelService  = "gantry.dev/service"
	LabelSpecHash = "gantry.dev/spec-hash"
	// LabelPortPrefix + name records a named port's container port.
	LabelPortPrefix = "gantry.dev/port."
	// LabelAddress is the replica's own address on its machine's bridge
	// (overlay clusters).
	LabelAddress   = "gantry.dev/address"
	managedByValue = "gantry"
)

// engineFeatures is what the engine offers, from `docker info`.
type engineFeatures struct {
	// TEERuntime is the sandbox runtime for replicas with runtime class
	// tee ("" if the engine has none).
	TEERuntime string
	// StorageQuota is whether the storage driver enforces a per-container
	// size (overlay2 on xfs with pquota, btrfs, zfs).
	StorageQuota bool
}

var unsafeName = regexp.MustCompile(`[^a-zA-Z0-9_.-]`)

// ContainerName is the name of a replica's container on a machine: unique
// per machine and replica, so the engine refuses a duplicate.
func ContainerName(machineID, replicaID string) string {
	return "gantry-" + unsafeName.ReplaceAllString(machineID, "_") + "-" + unsafeName.ReplaceAllString(replicaID, "_")
}

// containerConfig turns a runtime spec into the engine's create request.
// It is pure, so every field mapping is tested without an engine.
func containerConfig(s runtime.Spec, networkName string, publishIP string, f engineFeatures) (*container.Config, *container.HostConfig, error) {
	if s.Image == "" {
		return nil, nil, fmt.Errorf("the docker runtime needs spec.image")
	}
	cfg := &container.Config{
		Image:        s.Image,
		Entrypoint:   s.Command,
		Cmd:          s.Args,
		Env:          environment(s),
		WorkingDir:   s.WorkingDir,
		Labels:       labels(s),
		ExposedPorts: network.PortSet{},
	}
	host := &container.HostConfig{
		NetworkMode:  container.NetworkMode(networkName),
		PortBindings: network.PortMap{},
		Resources: container.Resources{
			NanoCPUs: s.MilliCPU * 1_000_000,
			Memory:   s.MemoryBytes,
		},
	}
	if s.StopTimeout > 0 {
		secs := int(s.StopTimeout.Seconds())
		cfg.StopTimeout = &secs
	}
	for _, name := range sortedKeys(s.ContainerPort) {
		cp := s.ContainerPort[name]
		if cp < 1 || cp > 65535 {
			return nil, nil, fmt.Errorf("port %s: container port %d is not between 1 and 65535", name, cp)
		}
		port, err := network.ParsePort(strconv.Itoa(cp) + "/tcp")
		if err != nil {
			return nil, nil, fmt.Errorf("port %s: %w", name, err)
		}
		cfg.ExposedPorts[port] = struct{}{}
		binding := network.PortBinding{} // HostPort "": the engine picks a free one
		if publishIP != "" {
			if err := binding.HostIP.UnmarshalText([]byte(publishIP)); err != nil {
				return nil, nil, fmt.Errorf("publish address %q: %w", publishIP, err)
			}
		}
		host.PortBindings[port] = append(host.PortBindings[port], binding)
	}
	if len(s.GPUDeviceIDs) > 0 {
		host.DeviceRequests = []container.DeviceRequest{{
			Driver: "nvidia", DeviceIDs: append([]string(nil), s.GPUDeviceIDs...), Capabilities: [][]string{{"gpu"}},
		}}
	}
	if s.EphemeralBytes > 0 && f.StorageQuota {
		host.StorageOpt = map[string]string{"size": strconv.FormatInt(s.EphemeralBytes, 10)}
	}
	if s.RuntimeClass == runtime.RuntimeClassTEE {
		if f.TEERuntime == "" {
			return nil, nil, fmt.Errorf("replica needs a TEE runtime, and this engine offers none (install kata-runtime or runsc)")
		}
		host.Runtime = f.TEERuntime
	}
	return cfg, host, nil
}

// onOwnAddress turns a create request into one for a container on its
// machine's bridge at the replica's own address: no network from the
// engine (the agent plumbs it after start), no published ports (the
// container's ports are reached at its address), and the machine's agent,
// at the bridge's address, as its resolver.
func onOwnAddress(cfg *container.Config, host *container.HostConfig, s runtime.Spec, gateway netip.Addr) error {
	addr, err := netip.ParseAddr(s.Address)
	if err != nil {
		return fmt.Errorf("replica address %q: %w", s.Address, err)
	}
	host.NetworkMode = container.NetworkMode(network.NetworkNone)
	host.PortBindings = nil
	cfg.ExposedPorts = nil
	cfg.Labels[LabelAddress] = addr.String()
	return withResolver(cfg, host, net.JoinHostPort(gateway.String(), "53"))
}

// withResolver makes the machine's agent at dns (host:port 53) the
// container's resolver: in /etc/resolv.conf and in $GANTRY_DNS, which
// replaces the agent's loopback address a container does not reach.
func withResolver(cfg *container.Config, host *container.HostConfig, dns string) error {
	h, _, err := net.SplitHostPort(dns)
	if err != nil {
		return fmt.Errorf("resolver %q: %w", dns, err)
	}
	addr, err := netip.ParseAddr(h)
	if err != nil {
		return fmt.Errorf("resolver %q: %w", dns, err)
	}
	host.DNS = []netip.Addr{addr}
	env := cfg.Env[:0:0]
	for _, kv := range cfg.Env {
		if !strings.HasPrefix(kv, DNSEnv+"=") {
			env = append(env, kv)
		}
	}
	cfg.Env = append(env, DNSEnv+"="+dns)
	return nil
}

// DNSEnv is where a replica finds its machine's resolver (host:port).
const DNSEnv = "GANTRY_DNS"

// environment is the service's env plus what Gantry tells every replica;
// PORT is the first named port's container port.
func environment(s runtime.Spec) []string {
	env := map[string]string{}
	for k, v := range s.Env {
		env[k] = v
	}
	env["GANTRY_REPLICA"], env["GANTRY_SERVICE"], env["GANTRY_MACHINE"] = s.ReplicaID, s.Service, s.MachineID
	for name := range s.SecretFiles {
		env[name+"_FILE"] = path.Join(runtime.SecretDir, name)
	}
	maps.Copy(env, runtime.PortEnv(s, s.ContainerPort))
	out := make([]string, 0, len(env))
	for _, k := range sortedKeys(env) {
		out = append(out, k+"="+env[k])
	}
	return out
}

func labels(s runtime.Spec) map[string]string {
	l := map[string]string{
		LabelManagedBy: managedByValue, LabelKind: KindReplica, LabelMachine: s.MachineID, LabelReplica: s.ReplicaID,
		LabelService: s.Service, LabelSpecHash: s.SpecHash,
	}
	for name, cp := range s.ContainerPort {
		l[LabelPortPrefix+name] = strconv.Itoa(cp)
	}
	return l
}

// containerPorts reads the named ports back from a container's labels.
func containerPorts(l map[string]string) map[string]int {
	out := map[string]int{}
	for k, v := range l {
		if name, ok := strings.CutPrefix(k, LabelPortPrefix); ok {
			if n, err := strconv.Atoi(v); err == nil {
				out[name] = n
			}
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
