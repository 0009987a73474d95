package agent

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gantry-dev/gantry/agent/mesh"
	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/runtime"
)

// keepNetwork joins the machine to its cluster's network as the names
// answers describe it; a join that fails (a TUN device not there yet, an
// interface name taken, the /24's address refused) is tried again every
// RetryInterval until it holds or a newer description comes. The overlay
// goes down when ctx ends.
func (a *Agent) keepNetwork(ctx context.Context) {
	defer a.closeOverlay()
	applyLatest(ctx, a.network, a.cfg.RetryInterval, a.joinNetwork)
}

// joinNetwork keeps the machine in its cluster's mesh: it brings the
// WireGuard interface up once the machine has a /24 (its key is then
// reported with the inventory, and the server hands it to the others),
// and replaces the peers with the cluster's other machines that have
// reported theirs. A machine that cannot join says so in NetworkReady.
func (a *Agent) joinNetwork(ctx context.Context, cfg *api.MeshConfig) error {
	var self *api.MeshPeer
	for i := range cfg.Peers {
		if cfg.Peers[i].Machine == a.machineID {
			self = &cfg.Peers[i]
		}
	}
	if self == nil {
		return nil // no /24 yet
	}
	if cfg.Mode == api.NetworkRouted {
		return a.joinRouted(ctx, self.Subnet, cfg.ContainerCIDR)
	}
	m, err := a.startOverlay(ctx, cfg.ContainerCIDR, self.Subnet)
	if err != nil {
		a.log.Error("cannot join the cluster's overlay", "err", err)
		a.setCondition(api.ConditionNetworkReady, false, "OverlayFailed", lastLine(err.Error(), maxConditionMessage))
		return err
	}
	var peers []mesh.Peer
	for _, p := range cfg.Peers {
		subnet, err := netip.ParsePrefix(p.Subnet)
		if p.Machine == a.machineID || p.PublicKey == "" || p.Endpoint == "" || err != nil {
			continue
		}
		peers = append(peers, mesh.Peer{PublicKey: p.PublicKey, Endpoint: p.Endpoint, Subnets: []netip.Prefix{subnet}})
	}
	if err := m.SetPeers(peers); err != nil {
		a.log.Error("overlay peers", "err", err)
		a.setCondition(api.ConditionNetworkReady, false, "OverlayFailed", lastLine(err.Error(), maxConditionMessage))
		return err
	}
	a.setCondition(api.ConditionNetworkReady, true, "Overlay", m.Kind()+" WireGuard "+a.cfg.Mesh.Interface+" at "+api.MeshAddress(self.Subnet)+" with "+strconv.Itoa(len(peers))+" peer(s)")
	return nil
}

// startOverlay brings the mesh interface up once, and answers names at
// the machine's overlay address too (its containers' resolver).
func (a *Agent) startOverlay(ctx context.Context, containerCIDR, subnet string) (*mesh.Mesh, error) {
	a.overlayMu.Lock()
	defer a.overlayMu.Unlock()
	if a.overlay != nil {
		return a.overlay, nil
	}
	cluster, err := netip.ParsePrefix(containerCIDR)
	if err != nil {
		return nil, err
	}
	addr, err := netip.ParseAddr(api.MeshAddress(subnet))
	if err != nil {
		return nil, err
	}
	cfg := a.cfg.Mesh
	if cfg.KeyFile == "" {
		cfg.KeyFile = filepath.Join(a.cfg.DataDir, "mesh.key")
	}
	if abs, err := filepath.Abs(cfg.KeyFile); err == nil {
		cfg.KeyFile = abs // a relative data dir (gantry dev's .gantry) is still this machine's own
	}
	cfg.Log = a.log.With("component", "overlay")
	endpoint, err := a.meshEndpointAddress()
	if err != nil {
		return nil, err
	}
	m, err := mesh.Start(cfg, addr, cluster)
	if err != nil {
		return nil, err
	}
	a.overlay, a.meshEndpoint = m, endpoint
	a.masquerade(subnet, cluster)
	a.answerNamesAt(ctx, addr)
	a.log.Info("joined the cluster's overlay", "interface", cfg.Interface, "address", addr, "key", m.PublicKey())
	a.resendInventory.Store(true) // the key and endpoint go to the server
	a.nudge()
	return m, nil
}

// joinRouted holds the machine's addresses for a network that routes its
// /24 here (network mode routed): no tunnel to bring up.
func (a *Agent) joinRouted(ctx context.Context, subnet, containerCIDR string) error {
	if err := a.startRouted(ctx, subnet, containerCIDR); err != nil {
		a.log.Error("cannot hold the machine's /24", "err", err)
		a.setCondition(api.ConditionNetworkReady, false, "RoutedFailed", lastLine(err.Error(), maxConditionMessage))
		return err
	}
	a.setCondition(api.ConditionNetworkReady, true, "Routed", api.MeshAddress(subnet)+" and "+subnet+" through the provider's network")
	return nil
}

func (a *Agent) startRouted(ctx context.Context, subnet, containerCIDR string) error {
	a.overlayMu.Lock()
	defer a.overlayMu.Unlock()
	if a.routed != nil {
		return nil
	}
	prefix, err := netip.ParsePrefix(subnet)
	if err != nil {
		return err
	}
	cluster, err := netip.ParsePrefix(containerCIDR)
	if err != nil {
		return err
	}
	addr := prefix.Masked().Addr().Next()
	r, err := mesh.StartRouted(a.cfg.RoutedLink, addr, prefix)
	if err != nil {
		return err
	}
	a.routed = r
	a.masquerade(subnet, cluster)
	a.answerNamesAt(ctx, addr)
	a.log.Info("holding the machine's /24 (routed by the provider's network)", "subnet", subnet, "link", a.cfg.RoutedLink)
	return nil
}

// answerNamesAt answers the cluster's names at the machine's own address
// too (its containers' resolver, on their bridge).
func (a *Agent) answerNamesAt(ctx context.Context, addr netip.Addr) {
	a.answerNamesAlsoAt(ctx, addr.String())
}

// answerNamesAlsoAt answers the cluster's names at host, port 53, as well
// as where the agent's own replicas ask; it returns that address ("" when
// it cannot listen there: the replicas that would ask have no resolver).
func (a *Agent) answerNamesAlsoAt(ctx context.Context, host string) string {
	if a.dns == nil {
		return ""
	}
	listen := net.JoinHostPort(host, "53")
	if err := a.dns.ListenAlso(ctx, listen); err != nil {
		a.log.Warn("cannot answer names for containers: they have no resolver", "address", listen, "err", err)
		return ""
	}
	return listen
}

// overlayIdentity is the machine's overlay key and WireGuard endpoint
// ("" before it joined).
func (a *Agent) overlayIdentity() (key, endpoint string) {
	a.overlayMu.Lock()
	defer a.overlayMu.Unlock()
	if a.overlay == nil || a.meshEndpoint == "" {
		return "", ""
	}
	return a.overlay.PublicKey(), net.JoinHostPort(a.meshEndpoint, strconv.Itoa(a.cfg.Mesh.ListenPort))
}

// meshEndpointAddress is the address the other machines send this one's
// WireGuard traffic to: --mesh-address, else --address, else (a cloud
// machine, whose agent is told neither) the address it reaches the server
// from.
func (a *Agent) meshEndpointAddress() (string, error) {
	if addr := cmp.Or(a.cfg.MeshAddress, a.cfg.Address); addr != "" && addr != MeshAddressAuto {
		return addr, nil
	}
	addr, err := a.addressTowardServer()
	if err != nil {
		return "", fmt.Errorf("mesh address auto: %w", err)
	}
	return addr, nil
}

// addressTowardServer is the address this machine reaches the (first)
// server from.
func (a *Agent) addressTowardServer() (string, error) {
	first, _, _ := strings.Cut(a.cfg.ServerURL, ",")
	u, err := url.Parse(strings.TrimSpace(first))
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("server URL %q: %v", first, err)
	}
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	// A UDP "connection" sends nothing: it only picks the route's source.
	c, err := net.Dial("udp", net.JoinHostPort(u.Hostname(), port))
	if err != nil {
		return "", fmt.Errorf("the route to the server: %w", err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).IP.String(), nil
}

// masquerade lets replicas at their own addresses reach beyond the
// cluster, from the machine's address (overlayMu held). Without it they
// still reach the cluster: a failure is logged, not fatal.
func (a *Agent) masquerade(subnet string, cluster netip.Prefix) {
	prefix, err := netip.ParsePrefix(subnet)
	if err == nil {
		a.unmasquerade, err = mesh.Masquerade(prefix, cluster)
	}
	if err != nil {
		a.log.Warn("replicas at their own addresses cannot reach beyond the cluster", "err", err)
	}
}

func (a *Agent) closeOverlay() {
	a.overlayMu.Lock()
	defer a.overlayMu.Unlock()
	if a.unmasquerade != nil {
		if err := a.unmasquerade(); err != nil {
			a.log.Warn("remove the replicas' masquerade", "err", err)
		}
		a.unmasquerade = nil
	}
	if a.overlay != nil {
		a.overlay.Close()
		a.overlay = nil
	}
	if a.routed != nil {
		a.routed.Close()
		a.routed = nil
	}
}

// overlayAddresses puts the replicas' own addresses (from this machine's
// /24) on the overlay interface, and takes off those of replicas gone.
func (a *Agent) overlayAddresses(assignments []api.Assignment) {
	a.overlayMu.Lock()
	var m interface{ SetLocalAddresses([]netip.Addr) error }
	if a.overlay != nil {
		m = a.overlay
	} else if a.routed != nil {
		m = a.routed
	}
	a.overlayMu.Unlock()
	if g, ok := a.driver.(runtime.AddressGiver); m == nil || ok && g.GivesAddresses() {
		return // containers on the bridge hold their addresses themselves
	}
	var addrs []netip.Addr
	for _, as := range assignments {
		if addr, err := netip.ParseAddr(as.Address); err == nil {
			addrs = append(addrs, addr)
		}
	}
	if err := m.SetLocalAddresses(addrs); err != nil {
		a.log.Warn("replicas' overlay addresses", "err", err)
	}
}
