package mesh

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/internal/testnet"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// The two-machine test runs each machine's side in a network namespace
// of its own: this test binary again, under `ip netns exec`, told its
// part by these variables.
const (
	helperEnv  = "GANTRY_MESH_HELPER" // this side's name: a or b
	dirEnv     = "GANTRY_MESH_DIR"    // where the sides swap keys and results
	subnetEnv  = "GANTRY_MESH_SUBNET" // this side's /24
	listenEnv  = "GANTRY_MESH_LISTEN" // this side's WireGuard endpoint
	peerEnv    = "GANTRY_MESH_PEER"   // name:subnet:endpoint of the other
	clusterNet = "10.244.0.0/16"
)

func TestMain(m *testing.M) {
	if name := os.Getenv(helperEnv); name != "" {
		if err := helper(name); err != nil {
			fmt.Fprintln(os.Stderr, "mesh helper:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// helper is one machine: it brings the overlay up, swaps public keys
// with the other side through FIFOs in the shared directory (the server's
// part), answers on its /24 address once it knows its peer, and calls the
// other's once that one answers; told to leave, it drops its peer ("drop")
// or keeps it, and calls once more.
func helper(name string) error {
	dir := os.Getenv(dirEnv)
	subnet := netip.MustParsePrefix(os.Getenv(subnetEnv))
	peerName, rest, _ := strings.Cut(os.Getenv(peerEnv), ":")
	peerSubnet, peerEndpoint, _ := strings.Cut(rest, ":")
	peerEndpoint = strings.Replace(peerEndpoint, "_", ":", 1)
	self := subnet.Addr().Next()
	cfg := DefaultConfig(filepath.Join(dir, name))
	cfg.Log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	_, port, _ := net.SplitHostPort(os.Getenv(listenEnv))
	fmt.Sscan(port, &cfg.ListenPort)
	m, err := Start(cfg, self, netip.MustParsePrefix(clusterNet))
	if err != nil {
		return err
	}
	defer m.Close()
	sent := sendAsync(filepath.Join(dir, name+".pub"), m.PublicKey())
	peerKey, err := receive(filepath.Join(dir, peerName+".pub"))
	if err != nil {
		return err
	}
	peer := Peer{PublicKey: peerKey, Endpoint: peerEndpoint, Subnets: []netip.Prefix{netip.MustParsePrefix(peerSubnet)}}
	if err := m.SetPeers([]Peer{peer}); err != nil {
		return err
	}
	l, err := net.Listen("tcp", net.JoinHostPort(self.String(), "7000"))
	if err != nil {
		return err
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			fmt.Fprintf(c, "%s\n", name)
			c.Close()
		}
	}()
	if err := <-sent; err != nil {
		return err
	}
	listening := sendAsync(filepath.Join(dir, name+".listening"), "yes")
	if _, err := receive(filepath.Join(dir, peerName+".listening")); err != nil {
		return err
	}
	peerAddr := net.JoinHostPort(netip.MustParsePrefix(peerSubnet).Addr().Next().String(), "7000")
	answer := call(peerAddr, reachWithin)
	rx, tx, _ := m.Traffic()
	// The same peers again (as every change of the cluster's names sends
	// them) keep the peer's session: its counters go on.
	before := peerRxBytes(m)
	if err := m.SetPeers([]Peer{peer}); err != nil {
		return err
	}
	kept := before > 0 && peerRxBytes(m) >= before
	route, _ := exec.Command("ip", "route", "get", netip.MustParsePrefix(peerSubnet).Addr().Next().String()).Output()
	result := fmt.Sprintf("answer=%s rx=%d tx=%d kept=%v kind=%s route=%s", answer, rx, tx, kept, m.Kind(), strings.TrimSpace(string(route)))
	if answer == "" {
		result += "\n" + whyNoAnswer(m)
	}
	if err := <-listening; err != nil {
		return err
	}
	if err := send(filepath.Join(dir, name+".result"), result); err != nil {
		return err
	}
	what, err := receive(filepath.Join(dir, name+".leave"))
	if err != nil {
		return err
	}
	if what == "drop" {
		if err := m.SetPeers(nil); err != nil {
			return err
		}
	}
	after := call(peerAddr, 2*time.Second)
	if err := send(filepath.Join(dir, name+".after"), "answer="+after); err != nil {
		return err
	}
	_, err = receive(filepath.Join(dir, name+".stop"))
	return err
}

// whyNoAnswer is what a side that got no answer saw: WireGuard's state,
// what its TUN device carried and dropped, and the namespace's IP and TCP
// counters (checksum errors, discards, resent SYNs).
func whyNoAnswer(m *Mesh) string {
	var b strings.Builder
	if u, ok := m.wg.(*userspace); ok {
		state, _ := u.dev.IpcGet()
		for _, line := range strings.Split(state, "\n") {
			if !strings.HasPrefix(line, "private_key") {
				fmt.Fprintf(&b, "  wg %s\n", line)
			}
		}
	}
	for _, stat := range []string{"rx_packets", "tx_packets", "rx_dropped", "tx_dropped", "rx_errors", "tx_errors"} {
		v, _ := os.ReadFile(filepath.Join("/sys/class/net", m.cfg.Interface, "statistics", stat))
		fmt.Fprintf(&b, "  tun %s=%s\n", stat, strings.TrimSpace(string(v)))
	}
	snmp, _ := os.ReadFile("/proc/net/snmp")
	netstat, _ := os.ReadFile("/proc/net/netstat")
	for _, line := range strings.Split(string(snmp)+string(netstat), "\n") {
		if strings.HasPrefix(line, "Ip:") || strings.HasPrefix(line, "Tcp:") || strings.HasPrefix(line, "TcpExt:") {
			fmt.Fprintf(&b, "  %s\n", line)
		}
	}
	return b.String()
}

// peerRxBytes is what WireGuard received from its one peer.
func peerRxBytes(m *Mesh) int64 {
	rx, _, err := m.Traffic()
	if err != nil {
		return -1
	}
	return rx
}

// reachWithin bounds how long a side's first call may wait for the
// other's answer. Userspace WireGuard can leave two ends that began a
// handshake at once with keys that do not match and log nothing
// (repair.go mends the case it logs); WireGuard's own timers mend it:
// the end that hears nothing back starts a new handshake after
// KeepaliveTimeout + RekeyTimeout (15 s) and a jitter, counted from the
// last packet it could authenticate. The test's calls raced exactly so
// on a loaded host (nothing for 20 s). The bound covers two such rounds:
// the kernel's SYN sent at 63 s then carries the call.
const reachWithin = 70 * time.Second

// call reads the other side's name at addr, which listens already (""
// when nothing answered within limit). One connection: the kernel
// resends its SYN (after 1, 3, 7, 15 and 31 s), so a session WireGuard
// mends within reachWithin carries one of them.
func call(addr string, limit time.Duration) string {
	c, err := net.DialTimeout("tcp", addr, limit)
	if err != nil {
		return ""
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(limit))
	line, _ := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line)
}

// The sides and the test talk through FIFOs the test makes: opening one
// blocks until the other end is opened, so each message is an event, with
// no polling. A side that died leaves its partner blocked until the test's
// deadline kills it.
var fifos = []string{"pub", "listening", "result", "leave", "after", "stop"}

func makeFIFOs(t *testing.T, dir string, names ...string) {
	t.Helper()
	for _, name := range names {
		for _, f := range fifos {
			if err := syscall.Mkfifo(filepath.Join(dir, name+"."+f), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// send writes msg to the FIFO at path once its reader opens it.
func send(path, msg string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := io.WriteString(f, msg); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// sendAsync sends from a goroutine, for a side that must read its peer's
// message before its own is read.
func sendAsync(path, msg string) <-chan error {
	done := make(chan error, 1)
	go func() { done <- send(path, msg) }()
	return done
}

// receive reads the message its writer sends to the FIFO at path.
func receive(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	return strings.TrimSpace(string(data)), err
}

// receiveWithin is receive for the test, which gives up after limit.
func receiveWithin(t *testing.T, path string, limit time.Duration) string {
	t.Helper()
	type got struct {
		msg string
		err error
	}
	done := make(chan got, 1)
	go func() {
		msg, err := receive(path)
		done <- got{msg, err}
	}()
	select {
	case g := <-done:
		if g.err != nil {
			t.Fatal(g.err)
		}
		return g.msg
	case <-time.After(limit):
		t.Fatalf("nothing on %s within %s", path, limit)
		return ""
	}
}

func run(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// Two machines, each in a network namespace of its own joined by a veth
// pair (the network between them): each reaches the other's /24 address
// through the overlay only (the route is the WireGuard interface, whose
// counters carry the traffic), and once one drops the other from its
// peers, the other's calls get no answer.
func TestTwoMachinesReachEachOthersSubnetThroughTheOverlay(t *testing.T) {
	testnet.Require(t, true)
	id := fmt.Sprintf("gm%d", os.Getpid()%100000)
	nsA, nsB := id+"a", id+"b"
	run(t, "ip", "netns", "add", nsA)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", nsA).Run() })
	run(t, "ip", "netns", "add", nsB)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", nsB).Run() })
	run(t, "ip", "link", "add", id+"va", "netns", nsA, "type", "veth", "peer", "name", id+"vb", "netns", nsB)
	for _, side := range []struct{ ns, link, addr string }{{nsA, id + "va", "192.168.77.1/30"}, {nsB, id + "vb", "192.168.77.2/30"}} {
		run(t, "ip", "-n", side.ns, "addr", "add", side.addr, "dev", side.link)
		run(t, "ip", "-n", side.ns, "link", "set", side.link, "up")
		run(t, "ip", "-n", side.ns, "link", "set", "lo", "up")
	}
	dir := t.TempDir()
	makeFIFOs(t, dir, "a", "b")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	sides := []struct{ name, ns, subnet, listen, peer string }{
		{"a", nsA, "10.244.1.0/24", "192.168.77.1:51820", "b:10.244.2.0/24:192.168.77.2_51820"},
		{"b", nsB, "10.244.2.0/24", "192.168.77.2:51820", "a:10.244.1.0/24:192.168.77.1_51820"},
	}
	ctx, cancel := context.WithTimeout(context.Background(), reachWithin+time.Minute)
	defer cancel()
	var helpers []*exec.Cmd
	for _, s := range sides {
		cmd := exec.CommandContext(ctx, "ip", "netns", "exec", s.ns, exe, "-test.run", "^$")
		cmd.Env = append(os.Environ(), helperEnv+"="+s.name, dirEnv+"="+dir, subnetEnv+"="+s.subnet, listenEnv+"="+s.listen, peerEnv+"="+s.peer)
		cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		helpers = append(helpers, cmd)
	}
	t.Cleanup(func() {
		for _, s := range sides {
			sendAsync(filepath.Join(dir, s.name+".stop"), "")
		}
		for _, h := range helpers {
			_ = h.Wait() // killed at the context's deadline if blocked
		}
	})
	results := map[string]string{}
	for _, s := range sides {
		results[s.name] = receiveWithin(t, filepath.Join(dir, s.name+".result"), reachWithin+15*time.Second)
		t.Logf("%s: %s", s.name, results[s.name])
	}
	for _, s := range sides {
		result := results[s.name]
		other := map[string]string{"a": "b", "b": "a"}[s.name]
		if !strings.Contains(result, "answer="+other+" ") || !strings.Contains(result, "dev gantry0") || strings.Contains(result, "rx=0 ") || strings.Contains(result, "tx=0 ") || !strings.Contains(result, "kept=true ") {
			t.Fatalf("%s: %s, want %s's answer over the overlay (route through gantry0, WireGuard counters moving, kept when the same peers are set again)", s.name, result, other)
		}
		if want := expectedBackend(); !strings.Contains(result, "kind="+want+" ") {
			t.Fatalf("%s: %s, want the %s WireGuard (auto: the kernel's where it has the module)", s.name, result, want)
		}
		if key, _ := os.ReadFile(filepath.Join(dir, s.name, "mesh.key")); len(key) == 0 {
			t.Fatalf("%s kept no private key", s.name)
		}
	}
	// a drops b (b left the cluster, as a's next peer list says): b,
	// which still has a as its peer, can no longer reach a.
	sendAsync(filepath.Join(dir, "a.leave"), "drop")
	receiveWithin(t, filepath.Join(dir, "a.after"), 10*time.Second)
	sendAsync(filepath.Join(dir, "b.leave"), "keep")
	if after := receiveWithin(t, filepath.Join(dir, "b.after"), 10*time.Second); after != "answer=" {
		t.Fatalf("b after a dropped it: %s, want no answer", after)
	}
}

// expectedBackend is what BackendAuto picks on this machine.
func expectedBackend() string {
	if _, err := os.Stat("/sys/module/wireguard"); err == nil {
		return BackendKernel
	}
	return BackendUserspace
}

func TestBackendIsRefusedWhenUnknownOrMissing(t *testing.T) {
	cfg := DefaultConfig(t.TempDir())
	cfg.Backend = "ebpf"
	if _, err := openWireGuard(cfg); err == nil || !strings.Contains(err.Error(), `"ebpf"`) {
		t.Fatalf("backend ebpf: %v, want an error naming it", err)
	}
	if expectedBackend() == BackendKernel {
		return // this kernel has WireGuard: asking for it is no error
	}
	cfg.Backend = BackendKernel
	cfg.Interface = fmt.Sprintf("gk%d", os.Getpid()%100000)
	_, err := openWireGuard(cfg)
	if err == nil || !strings.Contains(err.Error(), "wireguard module") {
		t.Fatalf("backend kernel without the module: %v, want an error saying the module is needed", err)
	}
}

func TestUAPITextSaysWhatChanges(t *testing.T) {
	key, err := wgtypes.ParseKey("YH1U2mJXF6qXn3lS3d3M4mO5cq3UHKv7QK5x7oFZk2c=")
	if err != nil {
		t.Fatal(err)
	}
	gone, _ := wgtypes.ParseKey("oPq1CZ4PU4Ojw0tY0xkN5oQ3c8yf7d2Gq8aDbd5d1Ug=")
	keepAlive, port := 25*time.Second, 51820
	text := uapiText(wgtypes.Config{PrivateKey: &key, ListenPort: &port, Peers: []wgtypes.PeerConfig{
		{PublicKey: gone, Remove: true},
		{PublicKey: key, Endpoint: &net.UDPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 51820}, PersistentKeepaliveInterval: &keepAlive, ReplaceAllowedIPs: true,
			AllowedIPs: []net.IPNet{{IP: net.IPv4(10, 244, 2, 0).To4(), Mask: net.CIDRMask(24, 32)}}},
	}})
	want := "private_key=" + hexKey(key) + "\nlisten_port=51820\n" +
		"public_key=" + hexKey(gone) + "\nremove=true\n" +
		"public_key=" + hexKey(key) + "\nendpoint=192.0.2.1:51820\npersistent_keepalive_interval=25\nreplace_allowed_ips=true\nallowed_ip=10.244.2.0/24\n"
	if text != want {
		t.Fatalf("uapi text:\n%s\nwant:\n%s", text, want)
	}
}
