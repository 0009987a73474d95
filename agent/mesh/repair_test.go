package mesh

import (
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/conn"
	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/tun/tuntest"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// recordingWireGuard is a WireGuard that reports the broken sessions the
// test sends and hands each configuration to the test.
type recordingWireGuard struct {
	broken     chan string
	configured chan wgtypes.Config
}

func (r *recordingWireGuard) kind() string                     { return "recording" }
func (r *recordingWireGuard) traffic() (int64, int64, error)   { return 0, 0, nil }
func (r *recordingWireGuard) brokenSessions() <-chan string    { return r.broken }
func (r *recordingWireGuard) close()                           {}
func (r *recordingWireGuard) configure(c wgtypes.Config) error { r.configured <- c; return nil }

func newKey(t *testing.T) wgtypes.Key {
	t.Helper()
	k, err := wgtypes.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k.PublicKey()
}

// A peer whose session WireGuard reports broken is removed and added
// again, as it was, in one configuration; a report naming no peer the
// mesh holds changes nothing.
func TestABrokenSessionIsMadeAgain(t *testing.T) {
	keepAlive := 25 * time.Second
	kept, broken := newKey(t), newKey(t)
	pc := func(k wgtypes.Key, host byte) wgtypes.PeerConfig {
		return wgtypes.PeerConfig{PublicKey: k, Endpoint: &net.UDPAddr{IP: net.IPv4(192, 0, 2, host), Port: 51820}, PersistentKeepaliveInterval: &keepAlive, ReplaceAllowedIPs: true,
			AllowedIPs: []net.IPNet{{IP: net.IPv4(10, 244, host, 0).To4(), Mask: net.CIDRMask(24, 32)}}}
	}
	wg := &recordingWireGuard{broken: make(chan string, 2), configured: make(chan wgtypes.Config, 2)}
	m := &Mesh{cfg: Config{Log: slog.New(slog.NewTextHandler(io.Discard, nil))}, wg: wg,
		peers: map[wgtypes.Key]wgtypes.PeerConfig{kept: pc(kept, 1), broken: pc(broken, 2)}}
	m.watchSessions()
	defer m.Close()
	wg.broken <- peerName(newKey(t)) // a peer that left meanwhile
	wg.broken <- peerName(broken)
	select {
	case c := <-wg.configured: // the reports are mended in turn: the first is the second's
		want := uapiText(wgtypes.Config{Peers: []wgtypes.PeerConfig{{PublicKey: broken, Remove: true}, pc(broken, 2)}})
		if got := uapiText(c); got != want {
			t.Fatalf("mended with:\n%s\nwant the broken peer removed and added again:\n%s", got, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the broken session was not mended")
	}
}

// The mesh finds the peer by the name userspace WireGuard logs it under.
func TestPeerNameIsWireGuardsOwn(t *testing.T) {
	dev := device.NewDevice(tuntest.NewChannelTUN().TUN(), conn.NewDefaultBind(), device.NewLogger(device.LogLevelSilent, ""))
	defer dev.Close()
	key := newKey(t)
	if err := dev.IpcSet("public_key=" + hexKey(key) + "\n"); err != nil {
		t.Fatal(err)
	}
	peer := dev.LookupPeer(device.NoisePublicKey(key))
	if peer == nil {
		t.Fatal("the device holds no peer for the key it was given")
	}
	if got, want := peerName(key), peer.String(); got != want {
		t.Fatalf("peerName = %q, WireGuard logs %q", got, want)
	}
}
