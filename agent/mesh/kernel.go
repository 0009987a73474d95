package mesh

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
	"golang.zx2c4.com/wireguard/wgctrl"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// kernel is the kernel's WireGuard: a link of type wireguard, configured
// over generic netlink with wgctrl. It needs the wireguard module (Linux
// 5.6 and later have it built in or as a module) and CAP_NET_ADMIN.
type kernel struct {
	name   string
	link   netlink.Link
	client *wgctrl.Client
}

func openKernel(cfg Config) (wireguard, error) {
	link := &netlink.Wireguard{LinkAttrs: netlink.LinkAttrs{Name: cfg.Interface, MTU: cfg.MTU}}
	if err := netlink.LinkAdd(link); err != nil {
		return nil, fmt.Errorf("create the kernel WireGuard link %s (needs the wireguard module and CAP_NET_ADMIN): %w", cfg.Interface, err)
	}
	client, err := wgctrl.New()
	if err != nil {
		_ = netlink.LinkDel(link)
		return nil, fmt.Errorf("WireGuard's netlink interface: %w", err)
	}
	if err := netlink.LinkSetUp(link); err != nil {
		client.Close()
		_ = netlink.LinkDel(link)
		return nil, fmt.Errorf("set %s up: %w", cfg.Interface, err)
	}
	return &kernel{name: cfg.Interface, link: link, client: client}, nil
}

func (k *kernel) kind() string { return BackendKernel }

func (k *kernel) configure(c wgtypes.Config) error { return k.client.ConfigureDevice(k.name, c) }

func (k *kernel) traffic() (rx, tx int64, err error) {
	dev, err := k.client.Device(k.name)
	if err != nil {
		return 0, 0, err
	}
	for _, p := range dev.Peers {
		rx += p.ReceiveBytes
		tx += p.TransmitBytes
	}
	return rx, tx, nil
}

func (k *kernel) brokenSessions() <-chan string { return nil }

func (k *kernel) close() {
	err := errors.Join(netlink.LinkDel(k.link), k.client.Close())
	_ = err // the link is gone with the machine's namespace anyway
}
