package azurefake

import (
	"context"
	"fmt"
	"net/http"
	"sort"

	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6"
	netfake "github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6/fake"
)

// The network side, for network mode routed: network interfaces (made
// with IP forwarding, given the next free private address of their
// subnet) and the routes of route tables the test declares. As ARM does,
// a route in a table that does not exist is ResourceNotFound, and a
// create of an existing name updates it.

// Route is what a test may check of a route.
type Route struct {
	Name, AddressPrefix, NextHopType, NextHopIP string
}

type network struct {
	nics   map[string]*armnetwork.Interface // resourceGroup/name
	tables map[string]map[string]Route      // resourceGroup/table → routes by name
	nextIP int
}

// AddRouteTable declares a route table in a resource group.
func (c *Cloud) AddRouteTable(resourceGroup, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.net.tables[resourceGroup+"/"+name] = map[string]Route{}
}

// Routes lists a route table's routes, by name.
func (c *Cloud) Routes(resourceGroup, table string) []Route {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Route
	for _, r := range c.net.tables[resourceGroup+"/"+table] {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Interface returns a copy of a network interface.
func (c *Cloud) Interface(resourceGroup, name string) (armnetwork.Interface, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	nic, ok := c.net.nics[resourceGroup+"/"+name]
	if !ok {
		return armnetwork.Interface{}, false
	}
	return *nic, true
}

// NetworkServer is the SDK's network fake server backed by this region.
func (c *Cloud) NetworkServer() *netfake.ServerFactory {
	return &netfake.ServerFactory{
		InterfacesServer: netfake.InterfacesServer{BeginCreateOrUpdate: c.createNIC, Get: c.getNIC},
		RoutesServer:     netfake.RoutesServer{BeginCreateOrUpdate: c.createRoute, BeginDelete: c.deleteRoute, Get: c.getRoute},
	}
}

func (c *Cloud) createNIC(_ context.Context, rg, name string, params armnetwork.Interface, _ *armnetwork.InterfacesClientBeginCreateOrUpdateOptions) (resp azfake.PollerResponder[armnetwork.InterfacesClientCreateOrUpdateResponse], errResp azfake.ErrorResponder) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := rg + "/" + name
	nic, exists := c.net.nics[key]
	if !exists {
		if params.Properties == nil || len(params.Properties.IPConfigurations) == 0 {
			errResp.SetResponseError(http.StatusBadRequest, "InvalidRequestFormat")
			return
		}
		c.net.nextIP++
		params.ID = to.Ptr("/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/" + rg + "/providers/Microsoft.Network/networkInterfaces/" + name)
		params.Name = to.Ptr(name)
		ipc := params.Properties.IPConfigurations[0]
		if ipc.Properties == nil {
			ipc.Properties = &armnetwork.InterfaceIPConfigurationPropertiesFormat{}
		}
		ipc.Properties.PrivateIPAddress = to.Ptr(fmt.Sprintf("10.1.%d.%d", c.net.nextIP/250, c.net.nextIP%250+4))
		params.Properties.ProvisioningState = to.Ptr(armnetwork.ProvisioningStateSucceeded)
		nic = &params
		c.net.nics[key] = nic
	}
	resp.AddNonTerminalResponse(http.StatusCreated, nil)
	resp.SetTerminalResponse(http.StatusOK, armnetwork.InterfacesClientCreateOrUpdateResponse{Interface: *nic}, nil)
	return
}

func (c *Cloud) getNIC(_ context.Context, rg, name string, _ *armnetwork.InterfacesClientGetOptions) (resp azfake.Responder[armnetwork.InterfacesClientGetResponse], errResp azfake.ErrorResponder) {
	c.mu.Lock()
	defer c.mu.Unlock()
	nic, ok := c.net.nics[rg+"/"+name]
	if !ok {
		notFound(&errResp)
		return
	}
	resp.SetResponse(http.StatusOK, armnetwork.InterfacesClientGetResponse{Interface: *nic}, nil)
	return
}

// dropNIC removes a VM's interface with it (its delete option).
func (c *Cloud) dropNIC(rg, id string) {
	for k, nic := range c.net.nics {
		if nic.ID != nil && *nic.ID == id && k[:len(rg)+1] == rg+"/" {
			delete(c.net.nics, k)
		}
	}
}

func (c *Cloud) createRoute(_ context.Context, rg, table, name string, params armnetwork.Route, _ *armnetwork.RoutesClientBeginCreateOrUpdateOptions) (resp azfake.PollerResponder[armnetwork.RoutesClientCreateOrUpdateResponse], errResp azfake.ErrorResponder) {
	c.mu.Lock()
	defer c.mu.Unlock()
	routes, ok := c.net.tables[rg+"/"+table]
	if !ok {
		notFound(&errResp)
		return
	}
	p := params.Properties
	if p == nil || p.AddressPrefix == nil || p.NextHopType == nil {
		errResp.SetResponseError(http.StatusBadRequest, "InvalidRequestFormat")
		return
	}
	r := Route{Name: name, AddressPrefix: *p.AddressPrefix, NextHopType: string(*p.NextHopType)}
	if p.NextHopIPAddress != nil {
		r.NextHopIP = *p.NextHopIPAddress
	}
	if r.NextHopType == string(armnetwork.RouteNextHopTypeVirtualAppliance) && r.NextHopIP == "" {
		errResp.SetResponseError(http.StatusBadRequest, "NextHopIpAddressRequired")
		return
	}
	routes[name] = r
	params.Name = to.Ptr(name)
	resp.AddNonTerminalResponse(http.StatusCreated, nil)
	resp.SetTerminalResponse(http.StatusOK, armnetwork.RoutesClientCreateOrUpdateResponse{Route: params}, nil)
	return
}

func (c *Cloud) deleteRoute(_ context.Context, rg, table, name string, _ *armnetwork.RoutesClientBeginDeleteOptions) (resp azfake.PollerResponder[armnetwork.RoutesClientDeleteResponse], errResp azfake.ErrorResponder) {
	c.mu.Lock()
	defer c.mu.Unlock()
	routes, ok := c.net.tables[rg+"/"+table]
	if !ok {
		notFound(&errResp)
		return
	}
	if _, ok := routes[name]; !ok {
		resp.SetTerminalResponse(http.StatusNoContent, armnetwork.RoutesClientDeleteResponse{}, nil)
		return
	}
	delete(routes, name)
	resp.AddNonTerminalResponse(http.StatusAccepted, nil)
	resp.SetTerminalResponse(http.StatusOK, armnetwork.RoutesClientDeleteResponse{}, nil)
	return
}

func (c *Cloud) getRoute(_ context.Context, rg, table, name string, _ *armnetwork.RoutesClientGetOptions) (resp azfake.Responder[armnetwork.RoutesClientGetResponse], errResp azfake.ErrorResponder) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.net.tables[rg+"/"+table][name]
	if !ok {
		notFound(&errResp)
		return
	}
	hop := armnetwork.RouteNextHopType(r.NextHopType)
	resp.SetResponse(http.StatusOK, armnetwork.RoutesClientGetResponse{Route: armnetwork.Route{Name: to.Ptr(name),
		Properties: &armnetwork.RoutePropertiesFormat{AddressPrefix: to.Ptr(r.AddressPrefix), NextHopType: &hop, NextHopIPAddress: to.Ptr(r.NextHopIP)}}}, nil)
	return
}
