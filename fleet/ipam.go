package fleet

import (
	"fmt"
	"net/netip"

	"github.com/gantry-dev/gantry/api"
)

// ErrSubnetsExhausted means every /24 of the cluster's range is taken.
type ErrSubnetsExhausted struct{ CIDR string }

func (e ErrSubnetsExhausted) Error() string {
	return fmt.Sprintf("no free /24 left in containerCidr %s", e.CIDR)
}

// NextSubnet returns the lowest /24 of cidr that no live machine holds.
func NextSubnet(cidr string, machines []*api.Machine) (string, error) {
	prefix, err := netip.ParsePrefix(cidr)
	if err != nil || !prefix.Addr().Is4() || prefix.Bits() > 24 {
		return "", fmt.Errorf("containerCidr %q is not an IPv4 range of /24 or larger", cidr)
	}
	used := map[string]bool{}
	for _, m := range machines {
		if m.Live() && m.Subnet != "" {
			used[m.Subnet] = true
		}
	}
	base := prefix.Addr().As4()
	start := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8
	for i := uint32(0); i < 1<<(24-prefix.Bits()); i++ {
		n := start + i<<8
		subnet := netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), 0}), 24).String()
		if !used[subnet] {
			return subnet, nil
		}
	}
	return "", ErrSubnetsExhausted{CIDR: cidr}
}
