package mesh

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
)

// Routed is a machine of a cluster whose network routes each machine's
// /24 to it (network mode routed): no tunnel and no encryption; the
// machine holds its own and its replicas' addresses on a local link, so
// that what the network brings for them is delivered here, and reaches
// the other machines' /24s through its default route.
type Routed struct {
	link    netlink.Link
	address netip.Addr
	subnet  netip.Prefix
}

// StartRouted puts the machine's address (its /24's first) on the link
// (lo: always up, and every kernel has it).
func StartRouted(linkName string, address netip.Addr, subnet netip.Prefix) (*Routed, error) {
	link, err := netlink.LinkByName(linkName)
	if err != nil {
		return nil, fmt.Errorf("routed mode: link %s: %w", linkName, err)
	}
	r := &Routed{link: link, address: address, subnet: subnet.Masked()}
	if err := r.SetLocalAddresses(nil); err != nil {
		return nil, err
	}
	return r, nil
}

// SetLocalAddresses makes addrs (replicas' own addresses in this
// machine's /24) the link's addresses in the /24 beside the machine's own.
func (r *Routed) SetLocalAddresses(addrs []netip.Addr) error {
	return setAddresses(r.link, r.subnet, append(slices.Clip(addrs), r.address))
}

// Close takes the /24's addresses off the link.
func (r *Routed) Close() {
	_ = setAddresses(r.link, r.subnet, nil)
}
