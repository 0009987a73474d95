package fleet

import (
	"errors"
	"testing"

	"github.com/gantry-dev/gantry/api"
)

func TestNextSubnet(t *testing.T) {
	live := func(subnet string) *api.Machine { return &api.Machine{Subnet: subnet, FleetState: api.FleetActive} }
	gone := func(subnet string) *api.Machine { return &api.Machine{Subnet: subnet, FleetState: api.FleetTerminated} }
	cases := []struct {
		name     string
		cidr     string
		machines []*api.Machine
		want     string
		wantErr  bool
	}{
		{"first", "10.244.0.0/16", nil, "10.244.0.0/24", false},
		{"skips taken", "10.244.0.0/16", []*api.Machine{live("10.244.0.0/24"), live("10.244.1.0/24")}, "10.244.2.0/24", false},
		{"reuses released", "10.244.0.0/16", []*api.Machine{gone("10.244.0.0/24"), live("10.244.1.0/24")}, "10.244.0.0/24", false},
		{"fills a gap", "10.244.0.0/16", []*api.Machine{live("10.244.0.0/24"), live("10.244.2.0/24")}, "10.244.1.0/24", false},
		{"crosses an octet", "10.0.0.0/8", []*api.Machine{}, "10.0.0.0/24", false},
		{"exhausted", "10.9.0.0/23", []*api.Machine{live("10.9.0.0/24"), live("10.9.1.0/24")}, "", true},
		{"too small", "10.9.0.0/25", nil, "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := NextSubnet(tc.cidr, tc.machines)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("got %s, want an error", got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %s", got, err, tc.want)
			}
		})
	}
	_, err := NextSubnet("10.9.0.0/24", []*api.Machine{live("10.9.0.0/24")})
	var exhausted ErrSubnetsExhausted
	if !errors.As(err, &exhausted) {
		t.Fatalf("exhaustion error %T: %v", err, err)
	}
}
