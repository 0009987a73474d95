package agent

import (
	"net"
	"net/netip"
	"path/filepath"
	"strconv"

	"github.com/gantry-dev/gantry/agent/mesh"
	"github.com/gantry-dev/gantry/api"
)

// joinOverlay keeps the machine in its cluster's mesh: it brings the
// WireGuard interface up once the machine has a /24 (its key is then
// reported with the inventory, and the server hands it to the others),
// and replaces the peers with the cluster's other machines that have
// reported theirs. A machine that cannot join says so in NetworkReady.
func (a *Agent) joinOverlay(cfg *api.MeshConfig) {
	var self *api.MeshPeer
	for i := range cfg.Peers {
		if cfg.Peers[i].Machine == a.machineID {
			self = &cfg.Peers[i]
		}
	}
	if self == nil {
		return // no /24 yet
	}
	m, err := a.startOverlay(cfg.ContainerCIDR, self.Subnet)
	if err != nil {
		a.log.Error("cannot join the cluster's overlay", "err", err)
		a.setCondition(api.ConditionNetworkReady, false, "OverlayFailed", lastLine(err.Error(), maxConditionMessage))
		return
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
		return
	}
	a.setCondition(api.ConditionNetworkReady, true, "Overlay", "WireGuard "+a.cfg.Mesh.Interface+" at "+api.MeshAddress(self.Subnet)+" with "+strconv.Itoa(len(peers))+" peer(s)")
}

// startOverlay brings the mesh interface up once.
func (a *Agent) startOverlay(containerCIDR, subnet string) (*mesh.Mesh, error) {
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
	m, err := mesh.Start(cfg, addr, cluster)
	if err != nil {
		return nil, err
	}
	a.overlay = m
	a.log.Info("joined the cluster's overlay", "interface", cfg.Interface, "address", addr, "key", m.PublicKey())
	a.resendInventory.Store(true) // the key and endpoint go to the server
	a.nudge()
	return m, nil
}

// overlayIdentity is the machine's overlay key and WireGuard endpoint
// ("" before it joined).
func (a *Agent) overlayIdentity() (key, endpoint string) {
	a.overlayMu.Lock()
	defer a.overlayMu.Unlock()
	if a.overlay == nil || a.cfg.Address == "" {
		return "", ""
	}
	return a.overlay.PublicKey(), net.JoinHostPort(a.cfg.Address, strconv.Itoa(a.cfg.Mesh.ListenPort))
}

func (a *Agent) closeOverlay() {
	a.overlayMu.Lock()
	defer a.overlayMu.Unlock()
	if a.overlay != nil {
		a.overlay.Close()
		a.overlay = nil
	}
}

// overlayAddresses puts the replicas' own addresses (from this machine's
// /24) on the overlay interface, and takes off those of replicas gone.
func (a *Agent) overlayAddresses(assignments []api.Assignment) {
	a.overlayMu.Lock()
	m := a.overlay
	a.overlayMu.Unlock()
	if m == nil {
		return
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
