package mesh

import (
	"fmt"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// Userspace WireGuard (golang.zx2c4.com/wireguard) can break a peer's
// session when both ends start a handshake at once, as two machines told
// of each other at the same moment do: its handshake workers run in
// parallel, and one that consumed the other's response may find the
// state already moved on by another that answered the other's initiation
// ("Failed to derive keypair: invalid state for keypair derivation").
// The two ends then hold keys that do not match. One end's packets reach
// the other, nothing comes back, and WireGuard's own timers mend it only
// after 15 s or more without an answer. The kernel's WireGuard takes the
// handshake under one lock and does not break so.
//
// The mesh mends such a session at once: told of the failure, it removes
// the peer and adds it again, which drops the peer's keys and starts a
// fresh handshake (the peer's keepalive is sent at once).

// watchSessions starts mending the sessions wg reports broken, until
// Close.
func (m *Mesh) watchSessions() {
	broken := m.wg.brokenSessions()
	if broken == nil {
		return
	}
	m.done = make(chan struct{})
	m.watching.Add(1)
	go func() {
		defer m.watching.Done()
		for {
			select {
			case <-m.done:
				return
			case name := <-broken:
				m.mendSession(name)
			}
		}
	}()
}

// mendSession re-makes the peer WireGuard names name ("peer(abcd…wxyz)",
// its key abbreviated); a peer it no longer holds is left alone.
func (m *Mesh) mendSession(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for key, pc := range m.peers {
		if peerName(key) != name {
			continue
		}
		err := m.wg.configure(wgtypes.Config{Peers: []wgtypes.PeerConfig{{PublicKey: key, Remove: true}, pc}})
		if err != nil {
			m.cfg.Log.Warn("overlay: re-make a peer whose WireGuard session broke", "peer", key.String(), "err", err)
			continue
		}
		m.cfg.Log.Info("overlay: re-made a peer whose WireGuard session broke (both ends began a handshake at once)", "peer", key.String())
	}
}

// peerName is how userspace WireGuard names a peer in its log.
func peerName(key wgtypes.Key) string {
	b64 := key.String()
	return fmt.Sprintf("peer(%s…%s)", b64[0:4], b64[39:43])
}
