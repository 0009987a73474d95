package aws_test

import (
	"context"
	"net/http"
	neturl "net/url"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/api"
	awsprov "github.com/gantry-dev/gantry/provider/aws"
	"github.com/gantry-dev/gantry/provider/aws/ec2fake"
	"github.com/gantry-dev/gantry/provisioner"
)

func routedLaunch(key, subnet string) provisioner.LaunchSpec {
	s := launchSpec(key)
	s.Bootstrap.NetworkMode, s.Subnet = api.NetworkRouted, subnet
	s.Config["routeTableId"] = "rtb-prod"
	return s
}

// Network mode routed: each launched instance forwards (source and
// destination check off) and the cluster's route table sends its /24 to
// it; a route an instance gone left for a /24 is replaced; a failed route
// fails the launch and the launch tried again routes the same instance;
// terminating takes the instance's route away and leaves the others.
func TestRoutedMachinesGetARouteForTheirSubnet(t *testing.T) {
	fake, url := newFake(t)
	fake.AddRouteTable("rtb-prod", "vpc-prod")
	p := newProvider(t, url)
	ctx := context.Background()

	fake.Fail("CreateRoute", "RequestLimitExceeded", "RequestLimitExceeded", "RequestLimitExceeded")
	if _, err := p.Launch(ctx, routedLaunch("rk-1", "10.244.1.0/24")); err == nil {
		t.Fatal("a launch whose route failed: no error")
	}
	first, err := p.Launch(ctx, routedLaunch("rk-1", "10.244.1.0/24"))
	if err != nil {
		t.Fatal(err)
	}
	second, err := p.Launch(ctx, routedLaunch("rk-2", "10.244.2.0/24"))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{first.ID, second.ID} {
		if fake.SourceDestCheck(id) {
			t.Errorf("%s still checks source and destination: it would drop its replicas' traffic", id)
		}
	}
	want := []ec2fake.Route{{Destination: "10.244.1.0/24", Instance: first.ID}, {Destination: "10.244.2.0/24", Instance: second.ID}}
	if got := fake.Routes("rtb-prod"); !sameRoutes(got, want) {
		t.Fatalf("routes %+v, want %+v", got, want)
	}
	host, err := p.Launch(ctx, launchSpec("rk-host"))
	if err != nil {
		t.Fatal(err)
	}
	if !fake.SourceDestCheck(host.ID) || len(fake.Routes("rtb-prod")) != 2 {
		t.Errorf("a host-mode machine was routed: check %v, routes %+v", fake.SourceDestCheck(host.ID), fake.Routes("rtb-prod"))
	}

	if err := p.Terminate(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	if got := fake.Routes("rtb-prod"); !sameRoutes(got, want[1:]) {
		t.Fatalf("after terminating %s: routes %+v, want only %+v", first.ID, got, want[1:])
	}
}

// A route left to an instance whose terminate did not delete it (the
// call failed, and the instance went anyway) is replaced by the next
// launch of that /24.
func TestALeftRouteIsReplaced(t *testing.T) {
	fake, url := newFake(t)
	fake.AddRouteTable("rtb-prod", "vpc-prod")
	p := newProvider(t, url)
	ctx := context.Background()
	old, err := p.Launch(ctx, routedLaunch("rk-old", "10.244.9.0/24"))
	if err != nil {
		t.Fatal(err)
	}
	fake.Fail("DeleteRoute", "RequestLimitExceeded", "RequestLimitExceeded", "RequestLimitExceeded")
	if err := p.Terminate(ctx, old.ID); err == nil {
		t.Fatal("terminate whose route deletion failed: no error")
	}
	// The instance goes anyway (as an interruption would take it).
	resp, err := http.PostForm(url, neturl.Values{"Action": {"TerminateInstances"}, "InstanceId.1": {old.ID}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	next, err := p.Launch(ctx, routedLaunch("rk-next", "10.244.9.0/24"))
	if err != nil {
		t.Fatal(err)
	}
	if got := fake.Routes("rtb-prod"); len(got) != 1 || got[0].Instance != next.ID {
		t.Fatalf("routes %+v, want 10.244.9.0/24 through %s", got, next.ID)
	}
}

func sameRoutes(a, b []ec2fake.Route) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestRoutedModeNeedsARouteTable(t *testing.T) {
	spec := api.ProviderSpec{Name: "aws", Region: "us-east-1", Config: map[string]string{"imageId": "ami-1"}}
	if err := awsprov.Routes(spec); err == nil || !strings.Contains(err.Error(), "spec.provider.config.routeTableId") {
		t.Fatalf("routed without a route table: %v, want an error naming routeTableId", err)
	}
	spec.Config["routeTableId"] = "main"
	if err := awsprov.Routes(spec); err == nil || !strings.Contains(err.Error(), "rtb-") {
		t.Fatalf("routeTableId main: %v, want an error asking for an rtb- id", err)
	}
	spec.Config["routeTableId"] = "rtb-0abc"
	if err := awsprov.Routes(spec); err != nil {
		t.Fatal(err)
	}
}
