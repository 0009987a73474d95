package azure_test

import (
	"context"
	"maps"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7/fake"
	netfake "github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6/fake"
	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/provider/azure"
	"github.com/gantry-dev/gantry/provider/azure/azurefake"
	"github.com/gantry-dev/gantry/provisioner"
)

// newRoutedProvider serves the network clients too.
func newRoutedProvider(t *testing.T, cloud *azurefake.Cloud) *azure.Provider {
	t.Helper()
	opts := &arm.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: fake.NewVirtualMachinesServerTransport(cloud.Server())}}
	netOpts := &arm.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: netfake.NewServerFactoryTransport(cloud.NetworkServer())}}
	p, err := azure.New(azure.Config{Location: "eastus", SubscriptionID: settings["subscriptionId"], ResourceGroup: "gantry-test",
		Credential: &azfake.TokenCredential{}, ClientOptions: opts, NetworkClientOptions: netOpts})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Network mode routed: the VM's interface is made first, forwarding, and
// a user-defined route sends the machine's /24 to its address; the VM is
// made with that interface. A launch whose route fails (no such table)
// fails, and tried again uses the same interface. Terminating deletes the
// route; a host-mode VM gets neither.
func TestRoutedMachinesGetARouteForTheirSubnet(t *testing.T) {
	cloud := azurefake.New()
	p := newRoutedProvider(t, cloud)
	ctx := context.Background()
	spec := launchSpec("rk-1")
	spec.Config = maps.Clone(spec.Config)
	spec.Config["routeTable"] = "gantry-routes"
	spec.Bootstrap.NetworkMode, spec.Subnet = api.NetworkRouted, "10.244.5.0/24"

	if _, err := p.Launch(ctx, spec); err == nil {
		t.Fatal("a launch into a route table that does not exist: no error")
	}
	cloud.AddRouteTable("gantry-test", "gantry-routes")
	inst, err := p.Launch(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	nic, ok := cloud.Interface("gantry-test", inst.ID+"-nic")
	if !ok || nic.Properties.EnableIPForwarding == nil || !*nic.Properties.EnableIPForwarding {
		t.Fatalf("interface of %s: %+v, want it made with IP forwarding", inst.ID, nic.Properties)
	}
	address := *nic.Properties.IPConfigurations[0].Properties.PrivateIPAddress
	routes := cloud.Routes("gantry-test", "gantry-routes")
	want := azurefake.Route{Name: inst.ID + "-subnet", AddressPrefix: "10.244.5.0/24", NextHopType: "VirtualAppliance", NextHopIP: address}
	if len(routes) != 1 || routes[0] != want {
		t.Fatalf("routes %+v, want only %+v", routes, want)
	}
	vm, _ := cloud.VM("gantry-test", inst.ID)
	refs := vm.Properties.NetworkProfile.NetworkInterfaces
	if len(refs) != 1 || *refs[0].ID != *nic.ID || len(vm.Properties.NetworkProfile.NetworkInterfaceConfigurations) != 0 {
		t.Fatalf("the VM's network profile %+v: want only the interface made for it", vm.Properties.NetworkProfile)
	}

	host, err := p.Launch(ctx, launchSpec("rk-host"))
	if err != nil {
		t.Fatal(err)
	}
	if _, made := cloud.Interface("gantry-test", host.ID+"-nic"); made || len(cloud.Routes("gantry-test", "gantry-routes")) != 1 {
		t.Error("a host-mode VM got an interface made ahead or a route")
	}
	for _, id := range []string{host.ID, inst.ID} {
		if err := p.Terminate(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if left := cloud.Routes("gantry-test", "gantry-routes"); len(left) != 0 {
		t.Fatalf("routes left after terminating: %+v", left)
	}
	for st := provisioner.State(""); st != provisioner.StateTerminated; {
		got, err := p.Describe(ctx, inst.ID)
		if err != nil {
			t.Fatal(err)
		}
		st = got.State
	}
}
