package mesh

import (
	"fmt"
	"strconv"
	"strings"

	"golang.zx2c4.com/wireguard/conn"
	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/tun"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// keypairFailure is what userspace WireGuard logs when a handshake it
// completed leaves no session (repair.go).
const keypairFailure = "Failed to derive keypair"

// brokenBuffer is how many broken sessions wait to be mended; reports
// beyond it are dropped, and WireGuard's own timers mend those sessions,
// later.
const brokenBuffer = 16

// userspace is WireGuard in this process (golang.zx2c4.com/wireguard) over
// a TUN device, configured through WireGuard's configuration protocol
// in process: no socket under /var/run/wireguard, which machines of one
// host in namespaces of their own would share.
type userspace struct {
	dev    *device.Device
	broken chan string
}

func openUserspace(cfg Config) (wireguard, error) {
	tdev, err := tun.CreateTUN(cfg.Interface, cfg.MTU)
	if err != nil {
		return nil, fmt.Errorf("create the overlay's TUN device %s (needs /dev/net/tun and CAP_NET_ADMIN): %w", cfg.Interface, err)
	}
	broken := make(chan string, brokenBuffer)
	logger := &device.Logger{Verbosef: device.DiscardLogf, Errorf: func(format string, args ...any) {
		cfg.Log.Warn("wireguard: " + fmt.Sprintf(format, args...))
		if strings.Contains(format, keypairFailure) && len(args) > 0 {
			select {
			case broken <- fmt.Sprint(args[0]): // the peer, as peer(abcd…wxyz)
			default: // already told; one mending re-makes the peer
			}
		}
	}}
	dev := device.NewDevice(tdev, conn.NewDefaultBind(), logger)
	if err := dev.Up(); err != nil {
		dev.Close()
		return nil, fmt.Errorf("WireGuard up: %w", err)
	}
	return &userspace{dev: dev, broken: broken}, nil
}

func (u *userspace) kind() string { return BackendUserspace }

func (u *userspace) configure(c wgtypes.Config) error { return u.dev.IpcSet(uapiText(c)) }

func (u *userspace) traffic() (rx, tx int64, err error) {
	state, err := u.dev.IpcGet()
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

func (u *userspace) brokenSessions() <-chan string { return u.broken }

func (u *userspace) close() { u.dev.Close() }

// uapiText writes c in WireGuard's configuration protocol (the "set"
// operation's body), the fields Gantry uses.
func uapiText(c wgtypes.Config) string {
	var b strings.Builder
	if c.PrivateKey != nil {
		fmt.Fprintf(&b, "private_key=%s\n", hexKey(*c.PrivateKey))
	}
	if c.ListenPort != nil {
		fmt.Fprintf(&b, "listen_port=%d\n", *c.ListenPort)
	}
	for _, p := range c.Peers {
		fmt.Fprintf(&b, "public_key=%s\n", hexKey(p.PublicKey))
		if p.Remove {
			b.WriteString("remove=true\n")
			continue
		}
		if p.Endpoint != nil {
			fmt.Fprintf(&b, "endpoint=%s\n", p.Endpoint)
		}
		if p.PersistentKeepaliveInterval != nil {
			fmt.Fprintf(&b, "persistent_keepalive_interval=%d\n", int(p.PersistentKeepaliveInterval.Seconds()))
		}
		if p.ReplaceAllowedIPs {
			b.WriteString("replace_allowed_ips=true\n")
		}
		for _, ip := range p.AllowedIPs {
			fmt.Fprintf(&b, "allowed_ip=%s\n", ip.String())
		}
	}
	return b.String()
}

func hexKey(k wgtypes.Key) string { return fmt.Sprintf("%x", k[:]) }
