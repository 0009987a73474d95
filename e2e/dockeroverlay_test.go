package e2e

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/internal/testnet"
	"github.com/moby/moby/client"
)

// dockerOverlaySpec is the overlay cluster; web calls egress ("": none)
// at /egress.
func dockerOverlaySpec(greeting string, port int, egress string) string {
	if egress != "" {
		egress = ", EGRESS: '" + egress + "'"
	}
	return fmt.Sprintf(dockerOverlayTemplate, greeting, egress, port)
}

const dockerOverlayTemplate = `kind: Cluster
metadata: {name: dov}
spec:
  provider: {name: docker}
  network: {mode: overlay}
  capacityGroups:
    - {groupId: general, instanceType: docker.medium, minSize: 2, maxSize: 2}
    - {groupId: edge, role: edge, instanceType: docker.small, minSize: 1, maxSize: 1}
  systemReserved: {cpu: 100m, memory: 64Mi}
---
kind: Service
metadata: {name: api}
spec:
  cluster: dov
  image: gantry-e2e:latest
  command: [/gantry, hello]
  env: {GREETING: api here}
  ports: [{name: http, containerPort: 8080}]
  replicas: 2
  resources: {cpu: 100m, memory: 64Mi}
  healthCheck: {http: {port: http, path: /healthz}, intervalSeconds: 1}
  placement: {capacityGroups: [general], spread: [{key: machine, maxSkew: 1}]}
---
kind: Service
metadata: {name: web}
spec:
  cluster: dov
  image: gantry-e2e:latest
  command: [/gantry, hello]
  env: {GREETING: %s, CALL: api.dov.gantry.%s}
  ports: [{name: http, containerPort: 8080}]
  expose: [{port: %d}]
  replicas: 2
  resources: {cpu: 100m, memory: 64Mi}
  healthCheck: {http: {port: http, path: /healthz}, intervalSeconds: 1}
  placement: {capacityGroups: [general]}
`

// The docker provider's machines in an overlay cluster: each machine
// container joins the WireGuard mesh, every replica container sits on its
// machine's bridge at an address of its own (all listen on the same
// container port, 8080), its resolver is its machine's agent, web calls
// both api replicas by name (the remote one through the mesh), and the
// edge machine's HAProxy serves web's exposed port through a rolling
// deployment without a failed request.
func TestDockerProviderOverlay(t *testing.T) {
	needHAProxy(t)
	cli := dockerSetup(t)
	testnet.Require(t, true)
	s, network := startDockerProviderServer(t, cli, "gantry-e2e-ov")
	port := freeTCPPort(t)
	egress := serveOutsideTheCluster(t, s)
	s.apply(t, "dov.yaml", dockerOverlaySpec("v1", port, egress))
	waitForMesh(t, s, 3)
	var web api.Replica
	apiReplicas := map[string]api.Replica{}
	waitFor(t, "web and both api replicas running on two machines, each at an address of its own on port 8080", func() (bool, string) {
		running := 0
		var where []string
		for _, r := range append(s.replicas("api"), s.replicas("web")...) {
			where = append(where, fmt.Sprintf("%s %s at %s:%d on %s", r.ID, r.State, r.Address, r.HostPorts["http"], r.Machine))
			if r.State == api.ReplicaRunning && r.PreviousMachine == "" && strings.HasPrefix(r.Address, "10.244.") && r.HostPorts["http"] == 8080 {
				running++
			}
			if r.Service == "web" {
				if r.ID == "web-0" {
					web = r
				}
			} else {
				apiReplicas[r.ID] = r
			}
		}
		spread := len(apiReplicas) == 2 && apiReplicas["api-0"].Machine != apiReplicas["api-1"].Machine
		return running == 4 && spread, strings.Join(where, "; ")
	})
	machinePid := machineContainerPid(t, cli, web.Machine)
	t.Cleanup(func() {
		if t.Failed() {
			for _, args := range [][]string{{"ip", "addr"}, {"ip", "route"}, {"ss", "-lunt"}} {
				out, _ := exec.Command("nsenter", append([]string{"-t", strconv.Itoa(machinePid), "-n"}, args...)...).CombinedOutput()
				t.Logf("%v in %s:\n%s", args, web.Machine, out)
			}
		}
	})
	resolvConf, err := os.ReadFile(fmt.Sprintf("/proc/%d/root/etc/resolv.conf", replicaContainerPid(t, cli, web)))
	if err != nil {
		t.Fatal(err)
	}
	if gw := strings.TrimSuffix(web.Address, web.Address[strings.LastIndex(web.Address, ".")+1:]) + "1"; !strings.Contains(string(resolvConf), "nameserver "+gw) {
		t.Fatalf("web's resolv.conf does not name its machine's agent at %s:\n%s", gw, resolvConf)
	}
	// Between machines, on the provider's network: WireGuard only, never
	// api's answer in clear.
	inspected, err := cli.NetworkInspect(context.Background(), network, client.NetworkInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bridge := "br-" + inspected.Network.ID[:12]
	wire := startCapture(t, bridge, 51820, []byte("api here"))
	callURL := fmt.Sprintf("http://%s:8080/call", web.Address)
	waitForCalls(t, []string{"nsenter", "-t", strconv.Itoa(machinePid), "-n"}, callURL, slices.Collect(maps.Keys(apiReplicas)))
	wireguard, cleartext := wire.stop()
	t.Logf("between the machines: %d WireGuard datagrams, %d frames with api's answer in clear", wireguard, cleartext)
	if wireguard == 0 || cleartext > 0 {
		t.Fatalf("between the machines: %d WireGuard datagrams, %d frames with api's answer in clear (want some, and none)", wireguard, cleartext)
	}
	// Beyond the cluster: the host's address on the provider's network,
	// which answers a replica only through its machine's masquerade.
	waitFor(t, "web reaching an address beyond the cluster", func() (bool, string) {
		body, ok := getVia(t, []string{"nsenter", "-t", strconv.Itoa(machinePid), "-n"}, fmt.Sprintf("http://%s:8080/egress", web.Address))
		return ok && strings.Contains(body, outsideAnswer), body
	})
	out, err := exec.Command("nsenter", "-t", strconv.Itoa(machinePid), "-n", "ip", "-s", "link", "show", "gantry0").CombinedOutput()
	if err != nil {
		t.Fatalf("the mesh interface of %s: %v %s", web.Machine, err, out)
	}
	if rx := rxBytes(string(out)); rx <= 0 {
		t.Fatalf("no traffic received through %s's mesh interface:\n%s", web.Machine, out)
	}
	url := edgeURL(t, s, cli, network, port)
	// The capture sees what crosses the bridge between machines: a request
	// in clear from web's machine to the edge machine's port is seen.
	control := startCapture(t, bridge, 51820, []byte("/cleartext-control"))
	waitFor(t, "a request in clear from "+web.Machine+" to the edge machine", func() (bool, string) {
		body, ok := getVia(t, []string{"nsenter", "-t", strconv.Itoa(machinePid), "-n"}, url+"cleartext-control")
		return ok, body
	})
	if _, seen := control.stop(); seen == 0 {
		t.Fatal("the capture saw no request in clear between two machines: it cannot tell WireGuard from clear")
	}
	servesThroughARollingDeployment(t, s, url, port, egress)
}

// edgeURL is the exposed port at the edge machine container's address.
func edgeURL(t *testing.T, s *server, cli *client.Client, network string, port int) string {
	t.Helper()
	edge := ""
	machines, err := s.api.ListMachines(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range machines {
		if m.Group == "edge" {
			edge = m.ID
		}
	}
	list, err := cli.ContainerList(context.Background(), client.ContainerListOptions{Filters: make(client.Filters).Add("label", "gantry.dev/machine="+edge, "gantry.dev/kind=machine")})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("edge machine container of %q: %v", edge, err)
	}
	c, err := cli.ContainerInspect(context.Background(), list.Items[0].ID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("http://%s:%d/", c.Container.NetworkSettings.Networks[network].IPAddress, port)
}

// servesThroughARollingDeployment sends a request every 10 ms to the edge
// machine's exposed port while web rolls to v2: none fails.
func servesThroughARollingDeployment(t *testing.T, s *server, url string, port int, egress string) {
	t.Helper()
	probe := newIngressClient(url)
	waitFor(t, "the edge machine serving web's exposed port at "+url, func() (bool, string) {
		probe.send()
		probe.mu.Lock()
		defer probe.mu.Unlock()
		return probe.ok > 0, strings.Join(probe.failures, "; ")
	})
	load := newIngressClient(url)
	stop := sync.OnceFunc(every(10*time.Millisecond, load.send))
	defer stop()
	if out, errOut, code := s.gantry("apply", "--wait", "-f", writeFile(t, s.dataDir, "dov2.yaml", dockerOverlaySpec("v2", port, egress))); code != 0 {
		t.Fatalf("apply --wait v2: %s%s", out, errOut)
	}
	stop()
	load.mu.Lock()
	defer load.mu.Unlock()
	t.Logf("%d requests answered (%v), %d failed", load.ok, load.bodies, load.failed)
	if load.failed > 0 || load.ok < 100 || load.bodies["v2"] == 0 {
		t.Fatalf("%d of %d requests failed (want 0 of at least 100, v2 among the answers %v): %v", load.failed, load.ok+load.failed, load.bodies, load.failures)
	}
}

// In host mode too, a docker machine's replica containers find services by
// name: their resolver is their machine's agent at its own address on the
// network they share (the agent's loopback is not theirs), and web calls
// both api replicas, reached at their published ports.
func TestDockerProviderHostModeNames(t *testing.T) {
	t.Parallel() // see parallelTests in helpers_test.go
	cli := dockerSetup(t)
	s, _ := startDockerProviderServer(t, cli, "gantry-e2e-hn")
	spec := strings.NewReplacer("  network: {mode: overlay}\n", "",
		"    - {groupId: edge, role: edge, instanceType: docker.small, minSize: 1, maxSize: 1}\n", "").Replace(dockerOverlaySpec("v1", freeTCPPort(t), ""))
	s.apply(t, "dhn.yaml", spec)
	var web api.Replica
	var apiIDs []string
	waitFor(t, "web and both api replicas running", func() (bool, string) {
		running := 0
		apiIDs = nil
		var where []string
		for _, r := range append(s.replicas("api"), s.replicas("web")...) {
			where = append(where, fmt.Sprintf("%s %s at %s:%d", r.ID, r.State, r.Address, r.HostPorts["http"]))
			if r.State == api.ReplicaRunning {
				running++
			}
			if r.ID == "web-0" {
				web = r
			} else if r.Service == "api" {
				apiIDs = append(apiIDs, r.ID)
			}
		}
		return running == 4, strings.Join(where, "; ")
	})
	// From this host's namespace: `env` runs the GET as it is.
	waitForCalls(t, []string{"env"}, fmt.Sprintf("http://%s:%d/call", web.Address, web.HostPorts["http"]), apiIDs)
}

// waitForMesh waits until n machines report NetworkReady with n-1 peers.
func waitForMesh(t *testing.T, s *server, n int) {
	t.Helper()
	peers := fmt.Sprintf("%d peer(s)", n-1)
	waitForNetworkReady(t, s, n, "in the mesh with "+peers+" each", func(c api.Condition) bool { return strings.Contains(c.Message, peers) })
}

// waitForNetworkReady waits until n machines report NetworkReady True with
// a condition that matches.
func waitForNetworkReady(t *testing.T, s *server, n int, what string, match func(api.Condition) bool) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d machines %s", n, what), func() (bool, string) {
		machines, err := s.api.ListMachines(context.Background(), "")
		if err != nil {
			return false, err.Error()
		}
		ready := 0
		var why []string
		for _, m := range machines {
			for _, c := range m.Conditions {
				if c.Type == api.ConditionNetworkReady {
					why = append(why, m.ID+": "+c.Status+" "+c.Reason+" "+c.Message)
					if c.Status == "True" && match(c) {
						ready++
					}
				}
			}
		}
		return ready == n, strings.Join(why, "; ")
	})
}

// machineContainerPid is the host pid of a docker provider machine.
func machineContainerPid(t *testing.T, cli *client.Client, machine string) int {
	t.Helper()
	list, err := cli.ContainerList(context.Background(), client.ContainerListOptions{Filters: make(client.Filters).Add("label", "gantry.dev/machine="+machine, "gantry.dev/kind=machine")})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("machine container of %s: %d found (%v)", machine, len(list.Items), err)
	}
	return containerPid(t, cli, list.Items[0].ID)
}

// replicaContainerPid is the host pid of a replica's container.
func replicaContainerPid(t *testing.T, cli *client.Client, r api.Replica) int {
	t.Helper()
	list, err := cli.ContainerList(context.Background(), client.ContainerListOptions{Filters: make(client.Filters).Add("label", "gantry.dev/replica="+r.ID, "gantry.dev/machine="+r.Machine)})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("container of %s: %d found (%v)", r.ID, len(list.Items), err)
	}
	return containerPid(t, cli, list.Items[0].ID)
}

func containerPid(t *testing.T, cli *client.Client, id string) int {
	t.Helper()
	c, err := cli.ContainerInspect(context.Background(), id, client.ContainerInspectOptions{})
	if err != nil || c.Container.State == nil || c.Container.State.Pid == 0 {
		t.Fatalf("inspect %s: %v", id, err)
	}
	return c.Container.State.Pid
}

// outsideAnswer is what serveOutsideTheCluster answers.
const outsideAnswer = "answered from outside the cluster"

// serveOutsideTheCluster answers HTTP at the server's host address (on
// the provider's network, outside every cluster's containerCidr) and
// returns its URL.
func serveOutsideTheCluster(t *testing.T, s *server) string {
	t.Helper()
	u, err := url.Parse(s.url)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(u.Hostname(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s, to %s\n", outsideAnswer, r.RemoteAddr)
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + l.Addr().String() + "/"
}
