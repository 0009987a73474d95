package local

import (
	"fmt"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
)

// Netns puts each local machine in a network namespace of its own,
// joined to a bridge of the host by a veth pair: machines with their own
// addresses on one network, as a cloud's instances in a subnet, which
// the overlay tests need (each machine its own WireGuard interface and
// routes). The bridge exists already, with the prefix's first address:
// the server listens there, and it is the machines' gateway.
type Netns struct {
	Bridge string
	Prefix netip.Prefix
}

// Enabled says whether machines get namespaces.
func (n *Netns) Enabled() bool { return n != nil && n.Bridge != "" }

func (n *Netns) gateway() netip.Addr { return n.Prefix.Masked().Addr().Next() }

// namespace is a machine's namespace; the veth names fit the kernel's 15
// characters.
func namespace(id string) string { return "gantry-" + id }
func vethHost(id string) string  { return "gh" + vethSuffix(id) }
func vethInner(id string) string { return "gn" + vethSuffix(id) }
func vethSuffix(id string) string {
	s := strings.TrimPrefix(id, "local-")
	return s[:min(len(s), 12)]
}

// address is the first free address of the prefix after the gateway.
func (n *Netns) address(taken map[string]bool) (netip.Addr, error) {
	for a := n.gateway().Next(); n.Prefix.Contains(a); a = a.Next() {
		if !taken[a.String()] && a != n.Prefix.Masked().Addr() {
			if next := a.Next(); !n.Prefix.Contains(next) {
				break // the broadcast address
			}
			return a, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("no address left in %s for a machine", n.Prefix)
}

// create makes a machine's namespace with its address (again when a
// stopped machine starts).
func (n *Netns) create(id string, addr netip.Addr) error {
	ns, host, inner := namespace(id), vethHost(id), vethInner(id)
	n.remove(id)
	steps := [][]string{
		{"netns", "add", ns},
		{"link", "add", host, "type", "veth", "peer", "name", inner, "netns", ns},
		{"link", "set", host, "master", n.Bridge, "up"},
		{"-n", ns, "addr", "add", addr.String() + "/" + strconv.Itoa(n.Prefix.Bits()), "dev", inner},
		{"-n", ns, "link", "set", inner, "up"},
		{"-n", ns, "link", "set", "lo", "up"},
		{"-n", ns, "route", "add", "default", "via", n.gateway().String()},
	}
	for _, args := range steps {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			n.remove(id)
			return fmt.Errorf("machine namespace: ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// route sends the host's traffic for a machine's /24 ("" for none) to its
// address on the bridge.
func (n *Netns) route(subnet string, addr netip.Addr) error {
	if subnet == "" {
		return nil
	}
	args := []string{"route", "replace", subnet, "via", addr.String(), "dev", n.Bridge}
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("route the machine's /24: ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// unroute removes the host's routes through a machine's address.
func (n *Netns) unroute(addr string) {
	if addr != "" {
		_ = exec.Command("ip", "route", "flush", "via", addr).Run()
	}
}

// remove deletes a machine's namespace (its veth pair goes with it).
func (n *Netns) remove(id string) {
	_ = exec.Command("ip", "netns", "del", namespace(id)).Run()
	_ = exec.Command("ip", "link", "del", vethHost(id)).Run()
}

// wrap runs binary with args in a machine's namespace (ip netns exec
// replaces itself with it: the process is the agent).
func (n *Netns) wrap(id, binary string, args []string) (string, []string) {
	return "ip", append([]string{"netns", "exec", namespace(id), binary}, args...)
}
