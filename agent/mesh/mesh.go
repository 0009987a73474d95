// Package mesh is a machine's side of a cluster's encrypted overlay: a
// WireGuard interface that carries the cluster's containerCidr to the
// other machines, each peer allowed its own /24. The kernel's WireGuard
// where the kernel has it, else userspace WireGuard over a TUN device
// (which needs no module). The private key is made on the machine and
// never leaves it; only the public key and the endpoint go to the
// server, which hands every machine its peers.
package mesh

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// Backends of the WireGuard interface.
const (
	// BackendAuto is the kernel's WireGuard when the kernel has it, else
	// userspace.
	BackendAuto      = "auto"
	BackendKernel    = "kernel"
	BackendUserspace = "userspace"
)

// Config is how the overlay runs on a machine.
type Config struct {
	// Interface names the WireGuard interface.
	Interface string
	// Backend is BackendAuto, BackendKernel or BackendUserspace.
	Backend string
	// ListenPort is WireGuard's UDP port.
	ListenPort int
	// MTU of the interface (WireGuard's 80 bytes of overhead below the
	// network's 1500).
	MTU int
	// KeyFile keeps the private key (made at the first start, mode 0600).
	KeyFile string
	// KeepAlive is how often a peer is sent a keepalive (through NAT).
	KeepAlive time.Duration
	Log       *slog.Logger
}

// DefaultConfig returns the defaults, the key under dir ("": the caller
// names the key file).
func DefaultConfig(dir string) Config {
	cfg := Config{Interface: "gantry0", Backend: BackendAuto, ListenPort: 51820, MTU: 1420, KeepAlive: 25 * time.Second, Log: slog.Default()}
	if dir != "" {
		cfg.KeyFile = filepath.Join(dir, "mesh.key")
	}
	return cfg
}

// Peer is another machine of the cluster as the overlay sees it.
type Peer struct {
	// PublicKey is its WireGuard public key (base64).
	PublicKey string
	// Endpoint is where its WireGuard listens (host:port).
	Endpoint string
	// Subnets are what it carries: its /24.
	Subnets []netip.Prefix
}

// Mesh is the running overlay interface.
type Mesh struct {
	cfg     Config
	key     wgtypes.Key
	wg      wireguard
	link    netlink.Link
	address netip.Addr

	mu sync.Mutex
	// peers is what WireGuard holds, by public key, as last set.
	peers map[wgtypes.Key]wgtypes.PeerConfig

	// done ends the mending of broken sessions (repair.go), watching
	// waits for it.
	done     chan struct{}
	watching sync.WaitGroup
}

// wireguard is one WireGuard implementation behind the interface.
type wireguard interface {
	// kind is "kernel" or "userspace".
	kind() string
	configure(wgtypes.Config) error
	// traffic is the bytes received and sent, over all peers.
	traffic() (rx, tx int64, err error)
	// brokenSessions names the peers whose session the implementation
	// failed to make (nil: it does not fail so; see repair.go).
	brokenSessions() <-chan string
	close()
}

// Start brings up the interface with this machine's address in the
// overlay (its /24's first address, as a /32) and a route to the whole
// containerCidr through it; the machine's own /24, routed locally, is
// more specific and stays off the overlay.
func Start(cfg Config, address netip.Addr, cluster netip.Prefix) (*Mesh, error) {
	if !filepath.IsAbs(cfg.KeyFile) {
		// Each machine's key is its own: a relative path could be shared.
		return nil, fmt.Errorf("overlay key file %q: want an absolute path", cfg.KeyFile)
	}
	key, err := loadOrMakeKey(cfg.KeyFile)
	if err != nil {
		return nil, err
	}
	wg, err := openWireGuard(cfg)
	if err != nil {
		return nil, err
	}
	m := &Mesh{cfg: cfg, key: key, wg: wg, address: address, peers: map[wgtypes.Key]wgtypes.PeerConfig{}}
	if err := m.configure(address, cluster); err != nil {
		wg.close()
		return nil, err
	}
	m.watchSessions()
	return m, nil
}

// openWireGuard makes the interface with the configured backend; auto
// tries the kernel first and says why it fell back.
func openWireGuard(cfg Config) (wireguard, error) {
	switch cfg.Backend {
	case BackendKernel:
		return openKernel(cfg)
	case BackendUserspace:
		return openUserspace(cfg)
	case BackendAuto, "":
		wg, err := openKernel(cfg)
		if err == nil {
			return wg, nil
		}
		cfg.Log.Info("no kernel WireGuard: using userspace WireGuard", "reason", err)
		return openUserspace(cfg)
	}
	return nil, fmt.Errorf("overlay backend %q: want %s, %s or %s", cfg.Backend, BackendAuto, BackendKernel, BackendUserspace)
}

// Kind is the WireGuard in use: "kernel" or "userspace".
func (m *Mesh) Kind() string { return m.wg.kind() }

func (m *Mesh) configure(address netip.Addr, cluster netip.Prefix) error {
	port := m.cfg.ListenPort
	if err := m.wg.configure(wgtypes.Config{PrivateKey: &m.key, ListenPort: &port}); err != nil {
		return fmt.Errorf("configure WireGuard: %w", err)
	}
	link, err := netlink.LinkByName(m.cfg.Interface)
	if err != nil {
		return fmt.Errorf("overlay interface %s: %w", m.cfg.Interface, err)
	}
	m.link = link
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: address.AsSlice(), Mask: net.CIDRMask(address.BitLen(), address.BitLen())}}
	if err := netlink.AddrReplace(link, addr); err != nil {
		return fmt.Errorf("address %s on %s: %w", address, m.cfg.Interface, err)
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return fmt.Errorf("set %s up: %w", m.cfg.Interface, err)
	}
	dst := &net.IPNet{IP: cluster.Addr().AsSlice(), Mask: net.CIDRMask(cluster.Bits(), cluster.Addr().BitLen())}
	if err := netlink.RouteReplace(&netlink.Route{LinkIndex: link.Attrs().Index, Dst: dst, Src: address.AsSlice()}); err != nil {
		return fmt.Errorf("route %s through %s: %w", cluster, m.cfg.Interface, err)
	}
	return nil
}

// PublicKey is what the server hands the other machines (base64).
func (m *Mesh) PublicKey() string { return m.key.PublicKey().String() }

// SetPeers makes peers the interface's peers: a machine that left is gone
// from them at once (its traffic is refused from then on). Only what
// changed is told to WireGuard: replacing every peer would drop each
// one's session, and every replica change in the cluster calls this.
func (m *Mesh) SetPeers(peers []Peer) error {
	keepAlive := m.cfg.KeepAlive
	want := map[wgtypes.Key]wgtypes.PeerConfig{}
	for _, p := range peers {
		pub, err := wgtypes.ParseKey(p.PublicKey)
		if err != nil {
			return fmt.Errorf("peer key %q: %w", p.PublicKey, err)
		}
		endpoint, err := net.ResolveUDPAddr("udp", p.Endpoint)
		if err != nil {
			return fmt.Errorf("peer endpoint %q: %w", p.Endpoint, err)
		}
		pc := wgtypes.PeerConfig{PublicKey: pub, Endpoint: endpoint, PersistentKeepaliveInterval: &keepAlive, ReplaceAllowedIPs: true}
		for _, s := range p.Subnets {
			pc.AllowedIPs = append(pc.AllowedIPs, net.IPNet{IP: s.Addr().AsSlice(), Mask: net.CIDRMask(s.Bits(), s.Addr().BitLen())})
		}
		want[pub] = pc
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var change []wgtypes.PeerConfig
	for key := range m.peers {
		if _, keep := want[key]; !keep {
			change = append(change, wgtypes.PeerConfig{PublicKey: key, Remove: true})
		}
	}
	for key, pc := range want {
		if had, ok := m.peers[key]; !ok || !samePeer(had, pc) {
			change = append(change, pc)
		}
	}
	if len(change) == 0 {
		return nil
	}
	if err := m.wg.configure(wgtypes.Config{Peers: change}); err != nil {
		return fmt.Errorf("set WireGuard peers: %w", err)
	}
	m.peers = want
	return nil
}

func samePeer(a, b wgtypes.PeerConfig) bool {
	return a.Endpoint.String() == b.Endpoint.String() && fmt.Sprint(a.AllowedIPs) == fmt.Sprint(b.AllowedIPs)
}

// SetLocalAddresses makes addrs (replicas' own addresses in this
// machine's /24) the interface's addresses beside the machine's own:
// packets the overlay brings for them are delivered here.
func (m *Mesh) SetLocalAddresses(addrs []netip.Addr) error {
	return setAddresses(m.link, netip.Prefix{}, append(slices.Clip(addrs), m.address))
}

// setAddresses makes addrs link's addresses (as /32s), removing the others
// it holds; within, when valid, limits what it removes to that prefix (a
// link it shares, as lo).
func setAddresses(link netlink.Link, within netip.Prefix, addrs []netip.Addr) error {
	name := link.Attrs().Name
	want := map[netip.Addr]bool{}
	for _, a := range addrs {
		want[a] = true
	}
	have, err := netlink.AddrList(link, netlink.FAMILY_V4)
	if err != nil {
		return fmt.Errorf("addresses of %s: %w", name, err)
	}
	for _, h := range have {
		a, ok := netip.AddrFromSlice(h.IP)
		if !ok {
			continue
		}
		a = a.Unmap()
		if want[a] {
			delete(want, a)
			continue
		}
		if within.IsValid() && !within.Contains(a) {
			continue
		}
		if err := netlink.AddrDel(link, &h); err != nil {
			return fmt.Errorf("remove %s from %s: %w", a, name, err)
		}
	}
	for a := range want {
		addr := &netlink.Addr{IPNet: &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(a.BitLen(), a.BitLen())}}
		if err := netlink.AddrReplace(link, addr); err != nil {
			return fmt.Errorf("address %s on %s: %w", a, name, err)
		}
	}
	return nil
}

// Traffic is what the interface sent and received, in bytes, over all
// peers (WireGuard's own counters).
func (m *Mesh) Traffic() (rx, tx int64, err error) { return m.wg.traffic() }

// Close takes the interface down and removes it.
func (m *Mesh) Close() {
	if m.done != nil {
		close(m.done)
		m.watching.Wait()
	}
	m.wg.close()
}

// loadOrMakeKey reads the machine's private key, or makes and keeps one.
func loadOrMakeKey(path string) (wgtypes.Key, error) {
	data, err := os.ReadFile(path)
	if err == nil {
		key, err := wgtypes.ParseKey(strings.TrimSpace(string(data)))
		if err != nil {
			return wgtypes.Key{}, fmt.Errorf("overlay key %s: %w", path, err)
		}
		return key, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return wgtypes.Key{}, fmt.Errorf("overlay key: %w", err)
	}
	key, err := wgtypes.GeneratePrivateKey()
	if err != nil {
		return wgtypes.Key{}, fmt.Errorf("make the overlay key: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return wgtypes.Key{}, err
	}
	if err := os.WriteFile(path, []byte(key.String()+"\n"), 0o600); err != nil {
		return wgtypes.Key{}, fmt.Errorf("keep the overlay key: %w", err)
	}
	return key, nil
}
