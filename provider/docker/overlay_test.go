package docker

import (
	"slices"
	"testing"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/provisioner"
)

// Only an overlay cluster's machine containers get what joining the mesh
// and plumbing replica containers takes; a host cluster's stay unprivileged.
func TestOnlyOverlayMachinesMayConfigureNetworks(t *testing.T) {
	p := &Provider{cfg: Config{Network: "gantry-test", Image: "gantry:test", SocketPath: "/var/run/docker.sock"}}
	it := provisioner.InstanceType{Name: "docker.small", MilliCPU: 500, MemoryBytes: 512 << 20}
	spec := provisioner.LaunchSpec{Tags: map[string]string{}, Bootstrap: provisioner.Bootstrap{Cluster: "c", Group: "g", MachineID: "m-1"}}
	cfg, host := p.machineConfig("id-1", it, spec, "http://172.30.0.1:7000", "172.30.0.1")
	if len(host.CapAdd) != 0 || host.PidMode != "" || len(host.Devices) != 0 || slices.Contains(cfg.Cmd, "--mesh-address") {
		t.Fatalf("a host-mode machine got caps %v pid %q devices %v cmd %v", host.CapAdd, host.PidMode, host.Devices, cfg.Cmd)
	}
	if i := slices.Index(cfg.Cmd, "--container-dns"); i < 0 || cfg.Cmd[i+1] != "auto" {
		t.Errorf("a host-mode machine's agent: %v, want --container-dns auto (its replica containers' resolver at its own address)", cfg.Cmd)
	}
	spec.Bootstrap.NetworkMode = api.NetworkOverlay
	cfg, host = p.machineConfig("id-1", it, spec, "http://172.30.0.1:7000", "172.30.0.1")
	if !slices.Contains(host.CapAdd, "NET_ADMIN") || !slices.Contains(host.CapAdd, "SYS_ADMIN") || host.PidMode != "host" {
		t.Errorf("overlay machine: caps %v pid %q", host.CapAdd, host.PidMode)
	}
	if len(host.Devices) != 1 || host.Devices[0].PathInContainer != "/dev/net/tun" || host.Sysctls["net.ipv4.ip_forward"] != "1" {
		t.Errorf("overlay machine: devices %v sysctls %v", host.Devices, host.Sysctls)
	}
	if slices.Contains(cfg.Cmd, "--container-dns") {
		t.Errorf("overlay machine's agent: %v: its containers' resolver is on their bridge", cfg.Cmd)
	}
	if i := slices.Index(cfg.Cmd, "--mesh-address"); i < 0 || cfg.Cmd[i+1] != "auto" {
		t.Errorf("overlay machine's agent: %v, want --mesh-address auto (its own address, not the host's)", cfg.Cmd)
	}
}
