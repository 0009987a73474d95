package azure

import (
	"context"
	"errors"
	"net/http"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6"
	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/provisioner"
)

// Routes says whether a cluster's settings let Azure route each machine's
// /24 to it (network mode routed): they name the route table, in the
// cluster's resource group, of the machines' subnet.
func Routes(p api.ProviderSpec) error {
	s, err := ParseSettings(p.Config)
	if err != nil {
		return err
	}
	if s.RouteTable == "" {
		return errors.New("spec.provider.config.routeTable: required for network mode routed on azure (the route table of the machines' subnet, in the resource group, which gets a user-defined route for each machine's /24)")
	}
	return nil
}

// routeName is the user-defined route of a VM's /24, named after the VM:
// a retried launch updates the same one, and Terminate knows it.
func routeName(vm string) string { return vm + "-subnet" }

// routedInterface makes the VM's network interface ahead of the VM, with
// IP forwarding on, and routes the machine's /24 to its private address:
// Azure's user-defined routes name a next hop by address, which a VM's
// own interface only has once it exists. It returns the reference the VM
// is made with (deleted with the VM). Both calls are idempotent by name.
func (p *Provider) routedInterface(ctx context.Context, name string, spec provisioner.LaunchSpec, s Settings) (*armcompute.NetworkInterfaceReference, error) {
	if spec.Subnet == "" || s.RouteTable == "" {
		return nil, provisioner.Errorf(provisioner.KindInvalid, "route", "network mode routed needs the machine's /24 and spec.provider.config.routeTable")
	}
	poller, err := p.nics.BeginCreateOrUpdate(ctx, p.cfg.ResourceGroup, name+"-nic", armnetwork.Interface{
		Location: to.Ptr(p.cfg.Location), Tags: encodeTags(spec.Tags),
		Properties: &armnetwork.InterfacePropertiesFormat{EnableIPForwarding: to.Ptr(true),
			IPConfigurations: []*armnetwork.InterfaceIPConfiguration{{Name: to.Ptr("ipconfig1"), Properties: &armnetwork.InterfaceIPConfigurationPropertiesFormat{
				Subnet: &armnetwork.Subnet{ID: to.Ptr(s.SubnetID)}, PrivateIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodDynamic)}}}},
	}, nil)
	if err != nil {
		return nil, classify("make the machine's network interface", err)
	}
	nic, err := poller.PollUntilDone(ctx, nil)
	if err != nil {
		return nil, classify("make the machine's network interface", err)
	}
	address := ""
	if props := nic.Properties; props != nil && len(props.IPConfigurations) > 0 && props.IPConfigurations[0].Properties != nil {
		address = str(props.IPConfigurations[0].Properties.PrivateIPAddress)
	}
	if address == "" {
		return nil, provisioner.Errorf(provisioner.KindTransport, "route", "network interface %s-nic has no private address yet", name)
	}
	route, err := p.routes.BeginCreateOrUpdate(ctx, p.cfg.ResourceGroup, s.RouteTable, routeName(name), armnetwork.Route{
		Properties: &armnetwork.RoutePropertiesFormat{AddressPrefix: to.Ptr(spec.Subnet),
			NextHopType: to.Ptr(armnetwork.RouteNextHopTypeVirtualAppliance), NextHopIPAddress: to.Ptr(address)}}, nil)
	if err == nil {
		_, err = route.PollUntilDone(ctx, nil)
	}
	if err != nil {
		return nil, classify("route the machine's /24", err)
	}
	return &armcompute.NetworkInterfaceReference{ID: nic.ID,
		Properties: &armcompute.NetworkInterfaceReferenceProperties{Primary: to.Ptr(true), DeleteOption: to.Ptr(armcompute.DeleteOptionsDelete)}}, nil
}

// unroute deletes the user-defined route of a VM of a routed cluster.
func (p *Provider) unroute(ctx context.Context, vm string, tags map[string]string) error {
	table := tags[provisioner.TagRouteTable]
	if table == "" {
		return nil
	}
	poller, err := p.routes.BeginDelete(ctx, p.cfg.ResourceGroup, table, routeName(vm), nil)
	if err == nil {
		_, err = poller.PollUntilDone(ctx, nil)
	}
	if err != nil && !isStatus(err, http.StatusNotFound) {
		return classify("delete the machine's route", err)
	}
	return nil
}
