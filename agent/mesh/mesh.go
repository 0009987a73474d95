// Package mesh is a machine's side of a cluster's encrypted overlay: a
// WireGuard interface (userspace WireGuard over a TUN device, which
// needs no kernel module) that carries the cluster's containerCidr to
// the other machines, each peer allowed its own /24. The private key is
// made on the machine and never leaves it; only the public key and the
// endpoint go to the server, which hands every machine its peers.
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
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"golang.zx2c4.com/wireguard/conn"
	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/tun"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// Config is how the overlay runs on a machine.
type Config struct {
	// Interface names the WireGuard interface.
	Interface string
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
	cfg := Config{Interface: "gantry0", ListenPort: 51820, MTU: 1420, KeepAlive: 25 * time.Second, Log: slog.Default()}
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
	dev     *device.Device
	link    netlink.Link
	address netip.Addr

	mu sync.Mutex
	// peers is what WireGuard holds, by public key (hex), as last set.
	peers map[string]string
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
	tdev, err := tun.CreateTUN(cfg.Interface, cfg.MTU)
	if err != nil {
		return nil, fmt.Errorf("create the overlay's TUN device %s (needs /dev/net/tun and CAP_NET_ADMIN): %w", cfg.Interface, err)
	}
	logger := &device.Logger{Verbosef: device.DiscardLogf, Errorf: func(format string, args ...any) {
		cfg.Log.Warn("wireguard: " + fmt.Sprintf(format, args...))
	}}
	dev := device.NewDevice(tdev, conn.NewDefaultBind(), logger)
	m := &Mesh{cfg: cfg, key: key, dev: dev, address: address, peers: map[string]string{}}
	if err := m.configure(address, cluster); err != nil {
		dev.Close()
		return nil, err
	}
	return m, nil
}

func (m *Mesh) configure(address netip.Addr, cluster netip.Prefix) error {
	if err := m.dev.IpcSet(fmt.Sprintf("private_key=%s\nlisten_port=%d\n", hexKey(m.key), m.cfg.ListenPort)); err != nil {
		return fmt.Errorf("configure WireGuard: %w", err)
	}
	if err := m.dev.Up(); err != nil {
		return fmt.Errorf("WireGuard up: %w", err)
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
	want := map[string]string{}
	for _, p := range peers {
		pub, err := wgtypes.ParseKey(p.PublicKey)
		if err != nil {
			return fmt.Errorf("peer key %q: %w", p.PublicKey, err)
		}
		endpoint, err := net.ResolveUDPAddr("udp", p.Endpoint)
		if err != nil {
			return fmt.Errorf("peer endpoint %q: %w", p.Endpoint, err)
		}
		var b strings.Builder
		fmt.Fprintf(&b, "public_key=%s\nendpoint=%s\npersistent_keepalive_interval=%d\nreplace_allowed_ips=true\n",
			hexKey(pub), endpoint, int(m.cfg.KeepAlive.Seconds()))
		for _, s := range p.Subnets {
			fmt.Fprintf(&b, "allowed_ip=%s\n", s)
		}
		want[hexKey(pub)] = b.String()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var b strings.Builder
	for key := range m.peers {
		if _, keep := want[key]; !keep {
			fmt.Fprintf(&b, "public_key=%s\nremove=true\n", key)
		}
	}
	for key, config := range want {
		if m.peers[key] != config {
			b.WriteString(config)
		}
	}
	if b.Len() == 0 {
		return nil
	}
	if err := m.dev.IpcSet(b.String()); err != nil {
		return fmt.Errorf("set WireGuard peers: %w", err)
	}
	m.peers = want
	return nil
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
func (m *Mesh) Traffic() (rx, tx int64, err error) {
	state, err := m.dev.IpcGet()
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(state, "\n") {
		k, v, _ := strings.Cut(line, "=")
		n, _ := strconv.ParseInt(v, 10, 64)
		switch k {
		case "rx_bytes":
			rx += n
		case "tx_bytes":
			tx += n
		}
	}
	return rx, tx, nil
}

// Close takes the interface down and removes it.
func (m *Mesh) Close() {
	m.dev.Close()
}

func hexKey(k wgtypes.Key) string { return fmt.Sprintf("%x", k[:]) }

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
