package bridge

import (
	"io"
	"net"
	"net/netip"
	"os/exec"
	goruntime "runtime"
	"strconv"
	"testing"

	"github.com/gantry-dev/gantry/internal/testnet"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// A task in a network namespace of its own (a process under `unshare
// --net`, as a container with no network is) is put on a bridge in the
// machine's namespace (a fresh one here): it answers at its address from
// the machine, reaches the machine through its default route, and a second
// Attach (a restarted agent) leaves it as it is.
func TestAttachPutsATaskOnTheMachinesBridge(t *testing.T) {
	testnet.Require(t, false)
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	origin, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer origin.Close()
	machine, err := netns.New() // this thread is in it from now on
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = netns.Set(origin)
		machine.Close()
	}()
	task := exec.Command("unshare", "--net", "sleep", "60")
	if err := task.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = task.Process.Kill(); _ = task.Wait() }()
	taskNs := waitOwnNamespace(t, task.Process.Pid, machine)
	defer taskNs.Close()

	b := New(DefaultConfig())
	addr := netip.MustParseAddr("10.9.3.2")
	if err := b.Attach(task.Process.Pid, addr); err != nil {
		t.Fatal(err)
	}
	if gw := b.Gateway(addr); gw.String() != "10.9.3.1" {
		t.Fatalf("gateway of %s: %s", addr, gw)
	}
	listener := listenIn(t, taskNs, machine, net.JoinHostPort(addr.String(), "0"))
	roundTrip(t, listener, "machine to task")
	fromTask := listenIn(t, machine, machine, "10.9.3.1:0")
	dialIn(t, taskNs, machine, fromTask)

	if err := b.Attach(task.Process.Pid, addr); err != nil {
		t.Fatalf("attach again: %v", err)
	}
	roundTrip(t, listener, "machine to task after a second attach")
	h, err := netlink.NewHandleAt(taskNs)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	eth0, err := h.LinkByName("eth0")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := eth0.Attrs().HardwareAddr.String(), "0a:58:0a:09:03:02"; got != want {
		t.Fatalf("eth0 MAC %s, want %s (from its address, so a reused address keeps its MAC)", got, want)
	}
	if eth0.Attrs().MTU != DefaultConfig().MTU {
		t.Fatalf("eth0 MTU %d, want the overlay's %d", eth0.Attrs().MTU, DefaultConfig().MTU)
	}
}

// waitOwnNamespace waits until pid has left the machine's namespace
// (unshare has run).
func waitOwnNamespace(t *testing.T, pid int, machine netns.NsHandle) netns.NsHandle {
	t.Helper()
	for {
		ns, err := netns.GetFromPid(pid)
		if err != nil {
			t.Fatal(err)
		}
		if !ns.Equal(machine) {
			return ns
		}
		ns.Close()
		goruntime.Gosched()
	}
}

// listenIn listens in namespace ns (the calling thread returns to back).
func listenIn(t *testing.T, ns, back netns.NsHandle, addr string) net.Listener {
	t.Helper()
	if err := netns.Set(ns); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", addr)
	if err := netns.Set(back); err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, "hello from "+l.Addr().String())
			c.Close()
		}
	}()
	return l
}

func dialIn(t *testing.T, ns, back netns.NsHandle, l net.Listener) {
	t.Helper()
	if err := netns.Set(ns); err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", l.Addr().String())
	if err := netns.Set(back); err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatalf("task to machine: %v", err)
	}
	readGreeting(t, c, l, "task to machine")
}

func roundTrip(t *testing.T, l net.Listener, what string) {
	t.Helper()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	readGreeting(t, c, l, what)
}

func readGreeting(t *testing.T, c net.Conn, l net.Listener, what string) {
	t.Helper()
	defer c.Close()
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "hello from "+l.Addr().String() {
		t.Fatalf("%s: read %q (%v)", what, got, err)
	}
}

func TestVethNamesFitTheKernelsLimit(t *testing.T) {
	host, peer := vethNames(netip.MustParseAddr("255.255.255.254"))
	if len(host) > 15 || len(peer) > 15 || host == peer {
		t.Fatalf("names %q %q", host, peer)
	}
	if h2, _ := vethNames(netip.MustParseAddr("10.0.0.2")); h2 == host {
		t.Fatal("two addresses share a name: " + strconv.Quote(h2))
	}
}
