package e2e

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/internal/testnet"
)

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
	// The bridge is the machines' network: what crosses it from machine to
	// machine is not the host's to filter (with bridge netfilter on, as
	// Docker leaves it, the FORWARD chain's DROP policy would drop it).
	if _, err := exec.LookPath("iptables"); err == nil {
		rule := []string{"FORWARD", "-i", name, "-o", name, "-j", "ACCEPT"}
		if out, err := exec.Command("iptables", append([]string{"-I"}, rule...)...).CombinedOutput(); err != nil {
			t.Fatalf("iptables: %v: %s", err, out)
		}
		t.Cleanup(func() { _ = exec.Command("iptables", append([]string{"-D"}, rule...)...).Run() })
	}
	return name, prefix
}

// startNetnsServer starts a server whose local machines each run in a
// network namespace of their own on this run's bridge (removed with the
// test, with the namespaces).
func startNetnsServer(t *testing.T) (*server, string, netip.Prefix) {
	t.Helper()
	bridge, prefix := machineBridge(t)
	dir := t.TempDir()
	t.Cleanup(func() {
		for _, inst := range localInstances(dir) {
			_ = exec.Command("ip", "netns", "del", "gantry-"+inst.ID).Run()
		}
	})
	s := startServer(t, dir, "--local-exit-with-server", "--listen", prefix.Addr().Next().String()+":0",
		"--local-netns-bridge", bridge, "--local-netns-cidr", prefix.String())
	return s, dir, prefix
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
	testnet.Require(t, false)
	s, dir, prefix := startNetnsServer(t)
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

// getFrom GETs url from inside a network namespace (this test binary,
// run there); ok is a 200 answer.
func getFrom(t *testing.T, ns, url string) (string, bool) {
	t.Helper()
	return getVia(t, []string{"ip", "netns", "exec", ns}, url)
}

// getVia GETs url with this test binary run under a command that enters a
// namespace (`ip netns exec NS`, `nsenter -t PID -n`).
func getVia(t *testing.T, enter []string, url string) (string, bool) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(enter[0], append(enter[1:], exe)...)
	cmd.Env = append(os.Environ(), getEnv+"="+url)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Sprintf("GET %s in %v: %v: %s", url, enter, err, out), false
	}
	return string(out), true
}

const overlaySpec = `kind: Cluster
metadata: {name: e2e}
spec:
  network: {mode: overlay}
  capacityGroups:
    - {groupId: general, instanceType: local.medium, minSize: 2, maxSize: 2}
  systemReserved: {cpu: 100m, memory: 128Mi}
---
kind: Service
metadata: {name: api}
spec:
  cluster: e2e
  command: [gantry, hello]
  env: {GREETING: api here}
  ports: [{name: http}]
  replicas: 2
  resources: {cpu: 100m, memory: 64Mi}
  healthCheck: {http: {port: http, path: /healthz}, intervalSeconds: 1}
  placement: {spread: [{key: machine, maxSkew: 1}]}
---
kind: Service
metadata: {name: web}
spec:
  cluster: e2e
  command: [gantry, hello]
  env: {GREETING: web here, CALL: api.e2e.gantry.}
  ports: [{name: http}]
  replicas: 1
  resources: {cpu: 100m, memory: 64Mi}
  healthCheck: {http: {port: http, path: /healthz}, intervalSeconds: 1}
`

// An overlay cluster's machines, each in a network namespace of its own:
// each joins the WireGuard mesh (NetworkReady, one peer), every replica
// gets an address of its own from its machine's /24, and web calls both
// api replicas by name — the one on the other machine through the mesh,
// whose interface counts the traffic.
func TestOverlayCarriesTrafficBetweenMachines(t *testing.T) {
	testnet.Require(t, true)
	s, dir, _ := startNetnsServer(t)
	s.apply(t, "overlay.yaml", overlaySpec)
	waitForMesh(t, s, 2)
	var web api.Replica
	apiMachines := map[string]string{}
	waitFor(t, "web and both api replicas running (api on both machines), each at an address of its own in its machine's /24", func() (bool, string) {
		running := 0
		seen := map[string]bool{}
		for _, r := range append(s.replicas("api"), s.replicas("web")...) {
			settled := r.State == api.ReplicaRunning && r.PreviousMachine == "" // not moving (spread repair)
			if settled && strings.HasPrefix(r.Address, "10.244.") && !strings.HasSuffix(r.Address, ".1") && !seen[r.Address] {
				running++
			}
			seen[r.Address] = true
			if r.Service == "web" {
				web = r
			} else {
				apiMachines[r.ID] = r.Machine
			}
		}
		var where []string
		for _, r := range append(s.replicas("api"), s.replicas("web")...) {
			where = append(where, fmt.Sprintf("%s %s at %s on %s", r.ID, r.State, r.Address, r.Machine))
		}
		spread := len(apiMachines) == 2 && apiMachines["api-0"] != apiMachines["api-1"]
		return running == 3 && spread, fmt.Sprintf("%d of 3, api on two machines %v: %s", running, spread, strings.Join(where, "; "))
	})
	inst := instanceOf(t, dir, web.Machine)
	ns := "gantry-" + inst.ID
	callURL := fmt.Sprintf("http://%s:%d/call", web.Address, web.HostPorts["http"])
	t.Cleanup(func() {
		if t.Failed() {
			for _, args := range [][]string{{"-n", ns, "addr"}, {"-n", ns, "route"}} {
				out, _ := exec.Command("ip", args...).CombinedOutput()
				t.Logf("ip %v:\n%s", args, out)
			}
			out, _ := exec.Command("ip", "netns", "exec", ns, "ss", "-ltn").CombinedOutput()
			t.Logf("listening in %s:\n%s", ns, out)
			t.Logf("web %+v", web)
			for _, r := range append(s.replicas("api"), s.replicas("web")...) {
				body, _ := getFrom(t, ns, fmt.Sprintf("http://%s:%d/", r.Address, r.HostPorts["http"]))
				t.Logf("GET %s (%s on %s at %s:%d) from %s: %s", r.ID, r.State, r.Machine, r.Address, r.HostPorts["http"], ns, body)
			}
			out, _ = exec.Command("ip", "-n", ns, "-s", "link", "show", "gantry0").CombinedOutput()
			t.Logf("gantry0: %s", out)
			machines, _ := s.api.ListMachines(context.Background(), "")
			for _, m := range machines {
				t.Logf("machine %s: subnet %s addresses %v mesh %s %s", m.ID, m.Subnet, m.Addresses, m.MeshKey, m.MeshEndpoint)
			}
			for _, inst := range localInstances(dir) {
				log, _ := os.ReadFile(filepath.Join(dir, "local", "machines", inst.ID, "agent.log"))
				t.Logf("%s agent log:\n%s", inst.ID, log)
			}
		}
	})
	waitForCalls(t, []string{"ip", "netns", "exec", ns}, callURL, slices.Collect(maps.Keys(apiMachines)))
	out, err := exec.Command("ip", "-n", ns, "-s", "link", "show", "gantry0").CombinedOutput()
	if err != nil {
		t.Fatalf("the mesh interface of %s: %v %s", web.Machine, err, out)
	}
	t.Logf("%s's gantry0:\n%s", web.Machine, out)
	if rx := rxBytes(string(out)); rx <= 0 {
		t.Fatalf("no traffic received through %s's mesh interface (RX %d bytes)", web.Machine, rx)
	}
}

// rxBytes is the received bytes in `ip -s link show` output (-1: none).
func rxBytes(out string) int64 {
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if strings.Contains(l, "RX:") && i+1 < len(lines) {
			var n int64
			if _, err := fmt.Sscan(strings.TrimSpace(lines[i+1]), &n); err == nil {
				return n
			}
		}
	}
	return -1
}

// A routed cluster's machines, each in a network namespace of its own: the
// provider's network (the host, the bridge's router) routes each machine's
// /24 to it, with no tunnel; web calls both api replicas by name, the
// remote one in clear through the host's route, and a terminated
// machine's route is gone. The cluster's containerCidr is this run's own:
// the routes are the host's.
func TestRoutedNetworkCarriesTrafficBetweenMachines(t *testing.T) {
	testnet.Require(t, false)
	s, dir, _ := startNetnsServer(t)
	cidr := fmt.Sprintf("10.%d.0.0/16", 100+os.Getpid()%100)
	spec := strings.Replace(strings.Replace(overlaySpec, "network: {mode: overlay}", "network: {mode: routed}\n  containerCidr: "+cidr, 1),
		"10.244.", strings.TrimSuffix(cidr, "0.0/16"), -1)
	s.apply(t, "routed.yaml", spec)
	waitForNetworkReady(t, s, 2, "routed", func(c api.Condition) bool { return c.Reason == "Routed" })
	prefix := strings.TrimSuffix(cidr, "0.0/16")
	var web api.Replica
	apiMachines := map[string]string{}
	waitFor(t, "web and both api replicas running at addresses of their own in their machines' /24s", func() (bool, string) {
		running := 0
		var where []string
		for _, r := range append(s.replicas("api"), s.replicas("web")...) {
			where = append(where, fmt.Sprintf("%s %s at %s on %s", r.ID, r.State, r.Address, r.Machine))
			if r.State == api.ReplicaRunning && r.PreviousMachine == "" && strings.HasPrefix(r.Address, prefix) && !strings.HasSuffix(r.Address, ".1") {
				running++
			}
			if r.Service == "web" {
				web = r
			} else {
				apiMachines[r.ID] = r.Machine
			}
		}
		spread := len(apiMachines) == 2 && apiMachines["api-0"] != apiMachines["api-1"]
		return running == 3 && spread, strings.Join(where, "; ")
	})
	machines, err := s.api.ListMachines(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	routes, _ := exec.Command("ip", "route", "show").Output()
	for _, m := range machines {
		if m.Live() && !strings.Contains(string(routes), m.Subnet+" via "+m.Addresses[0]) {
			t.Fatalf("the host has no route for %s's %s via %s:\n%s", m.ID, m.Subnet, m.Addresses[0], routes)
		}
	}
	ns := "gantry-" + instanceOf(t, dir, web.Machine).ID
	if out, _ := exec.Command("ip", "-n", ns, "link", "show", "gantry0").CombinedOutput(); !strings.Contains(string(out), "does not exist") {
		t.Fatalf("a routed machine has a mesh interface: %s", out)
	}
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := exec.Command("ip", "route").CombinedOutput()
			t.Logf("the host's routes:\n%s", out)
			logMachinesOnFailure(t, ns, dir)
		}
	})
	callURL := fmt.Sprintf("http://%s:%d/call", web.Address, web.HostPorts["http"])
	waitForCalls(t, []string{"ip", "netns", "exec", ns}, callURL, slices.Collect(maps.Keys(apiMachines)))
	for _, args := range [][]string{{"delete", "service", "web"}, {"delete", "service", "api"}, {"delete", "cluster", "e2e"}} {
		if _, errOut, code := s.gantry(args...); code != 0 {
			t.Fatalf("%v: %s", args, errOut)
		}
	}
	waitFor(t, "the machines' routes gone with them", func() (bool, string) {
		routes, _ := exec.Command("ip", "route", "show").Output()
		return !strings.Contains(string(routes), prefix), string(routes)
	})
}

// waitForCalls waits until web, called at callURL from inside a machine's
// namespace (enter), has relayed an answer from each api replica by name.
func waitForCalls(t *testing.T, enter []string, callURL string, ids []string) {
	t.Helper()
	answered := map[string]bool{}
	waitFor(t, "web calling every api replica by name", func() (bool, string) {
		body, ok := getVia(t, enter, callURL)
		if ok {
			for _, id := range ids {
				if strings.Contains(body, "replica "+id+" ") {
					answered[id] = true
				}
			}
		}
		return len(answered) == len(ids), body
	})
}

// logMachinesOnFailure prints a namespace's addresses and routes and the
// local machines' agent logs.
func logMachinesOnFailure(t *testing.T, ns, dir string) {
	t.Helper()
	for _, args := range [][]string{{"-n", ns, "addr"}, {"-n", ns, "route"}} {
		out, _ := exec.Command("ip", args...).CombinedOutput()
		t.Logf("ip %v:\n%s", args, out)
	}
	for _, inst := range localInstances(dir) {
		log, _ := os.ReadFile(filepath.Join(dir, "local", "machines", inst.ID, "agent.log"))
		t.Logf("%s agent log:\n%s", inst.ID, log)
	}
}
