// Package bridge gives the containers of one machine addresses of their own
// on the machine's /24, as the CNI bridge plugin does: the agent owns a
// Linux bridge in the machine's network namespace that holds the /24's
// first address, and each container gets one end of a veth pair (the other
// end on the bridge) with its address and a default route through the
// bridge. Packets for other machines' /24s leave through the overlay's
// interface, so the machine's namespace must forward (ip_forward=1).
package bridge

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// Config names the bridge and where task namespaces are found.
type Config struct {
	// Name is the bridge interface.
	Name string
	// MTU of the bridge and the veth pairs: the overlay's, so that packets
	// leaving through it need no fragmenting.
	MTU int
	// ProcRoot is where /proc/<pid>/ns/net is found for a task's pid as
	// the engine reports it (the host's pids: the agent shares the host's
	// pid namespace).
	ProcRoot string
	// ForwardingFile is the sysctl that lets the namespace route between
	// the bridge and the overlay; written when it is not 1 already.
	ForwardingFile string
}

// DefaultConfig is the bridge gantry-br0 with WireGuard's MTU.
func DefaultConfig() Config {
	return Config{Name: "gantry-br0", MTU: 1420, ProcRoot: "/proc", ForwardingFile: "/proc/sys/net/ipv4/ip_forward"}
}

// Bridge attaches task namespaces to the machine's bridge.
type Bridge struct {
	cfg Config
	mu  sync.Mutex
}

// New returns a bridge made on the first Attach.
func New(cfg Config) *Bridge { return &Bridge{cfg: cfg} }

// Gateway is the first address of addr's /24: the bridge's.
func (b *Bridge) Gateway(addr netip.Addr) netip.Addr {
	return netip.PrefixFrom(addr, 24).Masked().Addr().Next()
}

// Attach gives process pid's network namespace the address addr (as eth0,
// with a default route through the bridge). A namespace attached already
// (the agent restarted) is left as it is.
func (b *Bridge) Attach(pid int, addr netip.Addr) error {
	if !addr.Is4() {
		return fmt.Errorf("attach %s: only IPv4 addresses", addr)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	br, err := b.ensure(addr)
	if err != nil {
		return err
	}
	hostName, peerName := vethNames(addr)
	if l, err := netlink.LinkByName(hostName); err == nil {
		if l.Attrs().MasterIndex == br.Attrs().Index && l.Attrs().OperState != netlink.OperDown {
			return nil
		}
		_ = netlink.LinkDel(l) // a leftover of a replica gone: its address is being reused
	}
	target, err := netns.GetFromPath(filepath.Join(b.cfg.ProcRoot, strconv.Itoa(pid), "ns", "net"))
	if err != nil {
		return fmt.Errorf("network namespace of pid %d: %w", pid, err)
	}
	defer target.Close()
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: hostName, MTU: b.cfg.MTU, MasterIndex: br.Attrs().Index}, PeerName: peerName,
		PeerHardwareAddr: hardwareAddr(addr)}
	if err := netlink.LinkAdd(veth); err != nil {
		return fmt.Errorf("add veth %s: %w", hostName, err)
	}
	if err := b.plumb(target, veth, peerName, addr); err != nil {
		_ = netlink.LinkDel(veth)
		return err
	}
	return nil
}

// plumb moves the veth's peer into the task's namespace and configures it
// there.
func (b *Bridge) plumb(target netns.NsHandle, veth *netlink.Veth, peerName string, addr netip.Addr) error {
	peer, err := netlink.LinkByName(peerName)
	if err != nil {
		return fmt.Errorf("veth peer %s: %w", peerName, err)
	}
	if err := netlink.LinkSetNsFd(peer, int(target)); err != nil {
		return fmt.Errorf("move %s into the task's namespace: %w", peerName, err)
	}
	if err := netlink.LinkSetUp(veth); err != nil {
		return fmt.Errorf("bring %s up: %w", veth.Name, err)
	}
	h, err := netlink.NewHandleAt(target)
	if err != nil {
		return fmt.Errorf("enter the task's namespace: %w", err)
	}
	defer h.Close()
	inside, err := h.LinkByName(peerName)
	if err != nil {
		return fmt.Errorf("%s in the task's namespace: %w", peerName, err)
	}
	if err := h.LinkSetName(inside, "eth0"); err != nil {
		return fmt.Errorf("rename %s to eth0: %w", peerName, err)
	}
	ipnet := &net.IPNet{IP: addr.AsSlice(), Mask: net.CIDRMask(24, 32)}
	if err := h.AddrAdd(inside, &netlink.Addr{IPNet: ipnet}); err != nil {
		return fmt.Errorf("address %s on eth0: %w", addr, err)
	}
	if err := h.LinkSetUp(inside); err != nil {
		return fmt.Errorf("bring eth0 up: %w", err)
	}
	if lo, err := h.LinkByName("lo"); err == nil {
		_ = h.LinkSetUp(lo)
	}
	gw := b.Gateway(addr)
	if err := h.RouteAdd(&netlink.Route{LinkIndex: inside.Attrs().Index, Gw: gw.AsSlice()}); err != nil {
		return fmt.Errorf("default route via %s: %w", gw, err)
	}
	return nil
}

// ensure makes the bridge with the gateway of addr's /24, up, and lets the
// namespace forward.
func (b *Bridge) ensure(addr netip.Addr) (netlink.Link, error) {
	br, err := netlink.LinkByName(b.cfg.Name)
	if errors.As(err, new(netlink.LinkNotFoundError)) {
		err = netlink.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: b.cfg.Name, MTU: b.cfg.MTU}})
		if err != nil {
			return nil, fmt.Errorf("add bridge %s: %w", b.cfg.Name, err)
		}
		br, err = netlink.LinkByName(b.cfg.Name)
	}
	if err != nil {
		return nil, fmt.Errorf("bridge %s: %w", b.cfg.Name, err)
	}
	gw := b.Gateway(addr)
	if err := netlink.AddrReplace(br, &netlink.Addr{IPNet: &net.IPNet{IP: gw.AsSlice(), Mask: net.CIDRMask(24, 32)}}); err != nil {
		return nil, fmt.Errorf("address %s on %s: %w", gw, b.cfg.Name, err)
	}
	if err := netlink.LinkSetUp(br); err != nil {
		return nil, fmt.Errorf("bring %s up: %w", b.cfg.Name, err)
	}
	if err := b.forward(); err != nil {
		return nil, err
	}
	return br, nil
}

// forward turns forwarding on unless it is on (a container's /proc/sys is
// read-only: its engine sets the sysctl at creation).
func (b *Bridge) forward() error {
	if b.cfg.ForwardingFile == "" {
		return nil
	}
	data, err := os.ReadFile(b.cfg.ForwardingFile)
	if err == nil && len(data) > 0 && data[0] == '1' {
		return nil
	}
	if err := os.WriteFile(b.cfg.ForwardingFile, []byte("1\n"), 0o644); err != nil {
		return fmt.Errorf("turn forwarding on (%s): %w", b.cfg.ForwardingFile, err)
	}
	return nil
}

// hardwareAddr is the container end's MAC, made from its address (as the
// CNI bridge plugin once did): an address given to a new container after an
// old one left keeps its MAC, so the machine's neighbour cache, which still
// holds the old entry for up to half a minute, sends to the right one.
func hardwareAddr(addr netip.Addr) net.HardwareAddr {
	a := addr.As4()
	return net.HardwareAddr{0x0a, 0x58, a[0], a[1], a[2], a[3]}
}

// vethNames are the pair's names for an address: unique per address on the
// machine, and within the kernel's 15 characters.
func vethNames(addr netip.Addr) (host, peer string) {
	a := addr.As4()
	suffix := fmt.Sprintf("%02x%02x%02x%02x", a[0], a[1], a[2], a[3])
	return "gv" + suffix, "gp" + suffix
}
