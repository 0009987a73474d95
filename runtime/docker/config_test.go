package docker

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/runtime"
	"github.com/moby/moby/api/types/network"
)

func baseSpec() runtime.Spec {
	return runtime.Spec{
		ReplicaID: "web-0", Service: "web", MachineID: "m-1", SpecHash: "abc", Image: "example:1",
		Command: []string{"/srv"}, Args: []string{"--flag"}, Env: map[string]string{"A": "1"},
		ContainerPort: map[string]int{"http": 8080, "admin": 9090}, StopTimeout: 7 * time.Second,
		MilliCPU: 500, MemoryBytes: 256 << 20, EphemeralBytes: 1 << 30,
	}
}

func TestContainerConfigMapsTheSpec(t *testing.T) {
	cfg, host, err := containerConfig(baseSpec(), "gantry-net", "", engineFeatures{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Image != "example:1" || !slices.Equal(cfg.Entrypoint, []string{"/srv"}) || !slices.Equal(cfg.Cmd, []string{"--flag"}) {
		t.Errorf("image/entrypoint/cmd: %q %q %q", cfg.Image, cfg.Entrypoint, cfg.Cmd)
	}
	if host.NanoCPUs != 500_000_000 || host.Memory != 256<<20 {
		t.Errorf("limits: nanoCPUs %d memory %d", host.NanoCPUs, host.Memory)
	}
	if host.StorageOpt != nil {
		t.Errorf("storage size set on an engine without quota support: %v", host.StorageOpt)
	}
	if *cfg.StopTimeout != 7 || string(host.NetworkMode) != "gantry-net" {
		t.Errorf("stop timeout %d network %q", *cfg.StopTimeout, host.NetworkMode)
	}
	for _, want := range []string{"A=1", "GANTRY_REPLICA=web-0", "GANTRY_SERVICE=web", "GANTRY_MACHINE=m-1", "PORT=9090", "GANTRY_PORT_HTTP=8080", "GANTRY_PORT_ADMIN=9090"} {
		if !slices.Contains(cfg.Env, want) {
			t.Errorf("env lacks %s: %v", want, cfg.Env)
		}
	}
	for k, want := range map[string]string{LabelReplica: "web-0", LabelService: "web", LabelMachine: "m-1", LabelSpecHash: "abc", LabelPortPrefix + "http": "8080"} {
		if cfg.Labels[k] != want {
			t.Errorf("label %s = %q, want %q", k, cfg.Labels[k], want)
		}
	}
	for _, p := range []string{"8080/tcp", "9090/tcp"} {
		port := network.MustParsePort(p)
		if _, ok := cfg.ExposedPorts[port]; !ok {
			t.Errorf("port %s not exposed", p)
		}
		if b := host.PortBindings[port]; len(b) != 1 || b[0].HostPort != "" {
			t.Errorf("port %s bindings %v: want one, host port chosen by the engine", p, b)
		}
	}
	if len(host.DeviceRequests) != 0 || host.Runtime != "" {
		t.Errorf("no GPU, no TEE: device requests %v runtime %q", host.DeviceRequests, host.Runtime)
	}
}

func TestContainerConfigGPUsAndStorageQuota(t *testing.T) {
	s := baseSpec()
	s.GPUDeviceIDs = []string{"GPU-1111", "GPU-2222"}
	_, host, err := containerConfig(s, "bridge", "127.0.0.1", engineFeatures{StorageQuota: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(host.DeviceRequests) != 1 {
		t.Fatalf("device requests %v", host.DeviceRequests)
	}
	dr := host.DeviceRequests[0]
	if dr.Driver != "nvidia" || !slices.Equal(dr.DeviceIDs, []string{"GPU-1111", "GPU-2222"}) || dr.Count != 0 || !slices.Equal(dr.Capabilities[0], []string{"gpu"}) {
		t.Errorf("device request %+v: want exactly the given devices", dr)
	}
	if host.StorageOpt["size"] != "1073741824" {
		t.Errorf("storage opt %v", host.StorageOpt)
	}
	if b := host.PortBindings[network.MustParsePort("8080/tcp")]; b[0].HostIP.String() != "127.0.0.1" {
		t.Errorf("publish IP %v", b[0].HostIP)
	}
}

func TestContainerConfigTEERuntime(t *testing.T) {
	s := baseSpec()
	s.RuntimeClass = runtime.RuntimeClassTEE
	_, host, err := containerConfig(s, "bridge", "", engineFeatures{TEERuntime: "kata-runtime"})
	if err != nil || host.Runtime != "kata-runtime" {
		t.Fatalf("tee replica: runtime %q err %v", host.Runtime, err)
	}
	if _, _, err := containerConfig(s, "bridge", "", engineFeatures{}); err == nil || !strings.Contains(err.Error(), "TEE runtime") {
		t.Errorf("tee replica on an engine without one: %v", err)
	}
	// A standard replica never gets the sandbox runtime, even where one exists.
	_, host, _ = containerConfig(baseSpec(), "bridge", "", engineFeatures{TEERuntime: "runsc"})
	if host.Runtime != "" {
		t.Errorf("standard replica got runtime %q", host.Runtime)
	}
}

func TestContainerConfigRejectsBadInput(t *testing.T) {
	s := baseSpec()
	s.Image = ""
	if _, _, err := containerConfig(s, "bridge", "", engineFeatures{}); err == nil || !strings.Contains(err.Error(), "image") {
		t.Errorf("no image: %v", err)
	}
	s = baseSpec()
	s.ContainerPort = map[string]int{"http": 70000}
	if _, _, err := containerConfig(s, "bridge", "", engineFeatures{}); err == nil || !strings.Contains(err.Error(), "port http") {
		t.Errorf("port 70000: %v", err)
	}
	if _, _, err := containerConfig(baseSpec(), "bridge", "not-an-ip", engineFeatures{}); err == nil {
		t.Error("bad publish IP accepted")
	}
}

func TestContainerNameIsSafeAndUnique(t *testing.T) {
	if got := ContainerName("c/a b", "web-0"); got != "gantry-c_a_b-web-0" {
		t.Errorf("name %q", got)
	}
	if ContainerName("m1", "web-0") == ContainerName("m2", "web-0") {
		t.Error("same replica on two machines must not share a container name")
	}
}

func TestRuntimeIsTEE(t *testing.T) {
	for name, want := range map[string]bool{"kata-runtime": true, "kata-qemu": true, "runsc": true, "runc": false, "io.containerd.runc.v2": false, "nvidia": false} {
		if runtime.IsTEE(name) != want {
			t.Errorf("IsTEE(%q) != %v", name, want)
		}
	}
}

// A replica with an address of its own (an overlay cluster) gets no network
// from the engine and publishes nothing; its resolver is its machine's agent
// at the bridge's address, which replaces the one the agent set.
func TestOnOwnAddressLeavesTheNetworkToTheAgent(t *testing.T) {
	s := baseSpec()
	s.Address, s.Env = "10.244.3.7", map[string]string{DNSEnv: "127.0.0.1:5353"}
	cfg, host, err := containerConfig(s, "gantry-net", "", engineFeatures{})
	if err != nil {
		t.Fatal(err)
	}
	if err := onOwnAddress(cfg, host, s, netip.MustParseAddr("10.244.3.1")); err != nil {
		t.Fatal(err)
	}
	if host.NetworkMode != "none" || len(host.PortBindings) != 0 || len(cfg.ExposedPorts) != 0 {
		t.Errorf("network %q bindings %v exposed %v: want none and nothing published", host.NetworkMode, host.PortBindings, cfg.ExposedPorts)
	}
	if len(host.DNS) != 1 || host.DNS[0].String() != "10.244.3.1" {
		t.Errorf("resolver %v, want the bridge's address", host.DNS)
	}
	if cfg.Labels[LabelAddress] != "10.244.3.7" {
		t.Errorf("address label %q", cfg.Labels[LabelAddress])
	}
	if !slices.Contains(cfg.Env, DNSEnv+"=10.244.3.1:53") || slices.Contains(cfg.Env, DNSEnv+"=127.0.0.1:5353") {
		t.Errorf("env %v: want GANTRY_DNS at the bridge only", cfg.Env)
	}
	s.Address = "not-an-address"
	if err := onOwnAddress(cfg, host, s, netip.MustParseAddr("10.244.3.1")); err == nil || !strings.Contains(err.Error(), "not-an-address") {
		t.Errorf("a bad address: %v", err)
	}
}

// A replica in host mode is told where its machine's agent answers names
// for containers (the agent's loopback is not the container's).
func TestWithResolverPointsTheContainerAtItsAgent(t *testing.T) {
	s := baseSpec()
	s.Env = map[string]string{DNSEnv: "127.0.0.1:5353"}
	cfg, host, err := containerConfig(s, "gantry-net", "", engineFeatures{})
	if err != nil {
		t.Fatal(err)
	}
	if err := withResolver(cfg, host, "172.20.0.3:53"); err != nil {
		t.Fatal(err)
	}
	if len(host.DNS) != 1 || host.DNS[0].String() != "172.20.0.3" || !slices.Contains(cfg.Env, DNSEnv+"=172.20.0.3:53") || slices.Contains(cfg.Env, DNSEnv+"=127.0.0.1:5353") {
		t.Errorf("resolver %v env %v", host.DNS, cfg.Env)
	}
	if string(host.NetworkMode) != "gantry-net" || len(host.PortBindings) != 2 {
		t.Errorf("network %q bindings %v: a host-mode container keeps its network and ports", host.NetworkMode, host.PortBindings)
	}
	if err := withResolver(cfg, host, "no-port"); err == nil {
		t.Error("a resolver without a port: no error")
	}
}
