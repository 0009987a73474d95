package gcp_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/provisioner"
)

func routedLaunch(key, subnet string) provisioner.LaunchSpec {
	s := launchSpec(key)
	s.Bootstrap.NetworkMode, s.Subnet = api.NetworkRouted, subnet
	return s
}

// Network mode routed: an instance is made to forward (canIpForward) and
// a route on its network sends its /24 to it; a launch tried again after
// its route failed routes the same instance once; terminating deletes
// the route; a host-mode machine neither forwards nor is routed.
func TestRoutedMachinesGetARouteForTheirSubnet(t *testing.T) {
	fake, url := newFake(t)
	p := newProvider(t, url)
	ctx := context.Background()
	routed := routedLaunch("rk-1", "10.244.1.0/24")

	fake.FailRouteInserts(http.StatusForbidden)
	if _, err := p.Launch(ctx, routed); err == nil {
		t.Fatal("a launch whose route was refused: no error")
	}
	inst, err := p.Launch(ctx, routed)
	if err != nil {
		t.Fatal(err)
	}
	routes := fake.Routes()
	if len(routes) != 1 {
		t.Fatalf("%d routes, want 1: %v", len(routes), routes)
	}
	r := routes[0]
	_, name, _ := strings.Cut(inst.ID, "/")
	if r.GetDestRange() != "10.244.1.0/24" || !strings.HasSuffix(r.GetNextHopInstance(), "/zones/us-central1-b/instances/"+name) || r.GetNetwork() == "" {
		t.Errorf("route %v: want 10.244.1.0/24 through %s on the cluster's network", r, inst.ID)
	}
	if raw, _ := fake.Instance(inst.ID); !raw.GetCanIpForward() {
		t.Error("a routed machine cannot forward: its /24's packets would be dropped")
	}
	host, err := p.Launch(ctx, launchSpec("rk-host"))
	if err != nil {
		t.Fatal(err)
	}
	if raw, _ := fake.Instance(host.ID); raw.GetCanIpForward() || len(fake.Routes()) != 1 {
		t.Errorf("a host-mode machine: canIpForward %v, %d routes", raw.GetCanIpForward(), len(fake.Routes()))
	}
	if err := p.Terminate(ctx, host.ID); err != nil {
		t.Fatal(err)
	}
	if err := p.Terminate(ctx, inst.ID); err != nil {
		t.Fatal(err)
	}
	if left := fake.Routes(); len(left) != 0 {
		t.Fatalf("routes left after terminating: %v", left)
	}
}
