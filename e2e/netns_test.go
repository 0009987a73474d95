package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/api"
)

// needNetns skips without root or ip(8); on CI (root) their absence fails.
func needNetns(t *testing.T) {
	t.Helper()
	skip := t.Skipf
	if os.Getenv("CI") == "true" {
		skip = t.Fatalf
	}
	if os.Geteuid() != 0 {
		skip("machines in network namespaces need root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		skip("ip(8) is not installed (Debian package iproute2)")
	}
}

// machineBridge makes a bridge of this run with the first address of a
// /24 of its own, removed with the test.
func machineBridge(t *testing.T) (string, netip.Prefix) {
	t.Helper()
	n := os.Getpid() % 250
	name := fmt.Sprintf("gb%d", os.Getpid()%100000)
	prefix := netip.MustParsePrefix(fmt.Sprintf("172.31.%d.0/24", n))
	for _, args := range [][]string{
		{"link", "add", name, "type", "bridge"},
		{"addr", "add", prefix.Addr().Next().String() + "/24", "dev", name},
		{"link", "set", name, "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", name).Run() })
	return name, prefix
}

// netOf is the network namespace of a process.
func netOf(pid int) string {
	link, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid))
	return link
}

// Local machines in network namespaces of their own (--local-netns-*):
// each gets its own address on the bridge, its agent runs in its own
// namespace and reaches the server through the bridge, and its replicas
// answer at the machine's address.
func TestLocalMachinesInNetworkNamespaces(t *testing.T) {
	needNetns(t)
	bridge, prefix := machineBridge(t)
	dir := t.TempDir()
	t.Cleanup(func() {
		for _, inst := range localInstances(dir) {
			_ = exec.Command("ip", "netns", "del", "gantry-"+inst.ID).Run()
		}
	})
	s := startServer(t, dir, "--local-exit-with-server", "--listen", prefix.Addr().Next().String()+":0",
		"--local-netns-bridge", bridge, "--local-netns-cidr", prefix.String())
	s.apply(t, "web.yaml", deployment(2, "netns", "  placement: {spread: [{key: machine, maxSkew: 1}]}\n"))
	waitFor(t, "2 replicas answering at their machines' addresses", func() (bool, string) {
		return allAnswer(s.replicas("web"), 2)
	})
	machines, err := s.api.ListMachines(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, m := range machines {
		if !m.Live() || m.FleetState == api.FleetTerminating {
			continue
		}
		addr, err := netip.ParseAddr(m.Addresses[0])
		if err != nil || !prefix.Contains(addr) || seen[addr.String()] {
			t.Fatalf("machine %s address %v, want a distinct one in %s", m.ID, m.Addresses, prefix)
		}
		seen[addr.String()] = true
		inst := instanceOf(t, dir, m.ID)
		t.Logf("machine %s at %s, agent pid %d in %s", m.ID, addr, inst.PID, netOf(inst.PID))
		if ns := netOf(inst.PID); ns == "" || ns == netOf(os.Getpid()) {
			t.Fatalf("machine %s's agent (pid %d) runs in network namespace %q, want one of its own", m.ID, inst.PID, ns)
		}
	}
	for _, r := range s.replicas("web") {
		if !strings.HasPrefix(r.Address, strings.TrimSuffix(prefix.Addr().String(), "0")) {
			t.Fatalf("replica %s at %s, want its machine's address in %s", r.ID, r.Address, prefix)
		}
	}
}
