// Package azurefake is an in-memory Azure region for Gantry's azure
// provider tests. It fills the SDK's own fake server
// (armcompute/fake.VirtualMachinesServer), so the real armcompute client
// runs against it through fake.NewVirtualMachinesServerTransport: requests
// and responses go through the SDK's real serialization and pollers. VMs
// move through Azure's provisioning and power states over successive
// reads, and errors can be injected. The network side (network.go) serves
// the interfaces and routes of network mode routed.
package azurefake

import (
	"context"
	"net/http"
	"sort"
	"sync"
	"time"

	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6"
)

// Cloud holds the fake's VMs.
type Cloud struct {
	// PageSize bounds list pages.
	PageSize int

	mu       sync.Mutex
	vms      map[string]*vm // resourceGroup/name
	failNext []failure
	net      network
}

type vm struct {
	model     armcompute.VirtualMachine
	power     string // running, starting, stopping, deallocating, deallocated
	reads     int
	deleting  bool
	provision string
}

type failure struct {
	status int
	code   string
}

// New returns an empty region.
func New() *Cloud {
	return &Cloud{PageSize: 5, vms: map[string]*vm{},
		net: network{nics: map[string]*armnetwork.Interface{}, tables: map[string]map[string]Route{}}}
}

// FailCreate makes the next create fail with an HTTP status and ARM error
// code (409 SkuNotAvailable, 403 AuthorizationFailed...).
func (c *Cloud) FailCreate(status int, code string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failNext = append(c.failNext, failure{status, code})
}

// VM returns a copy of a VM's model.
func (c *Cloud) VM(resourceGroup, name string) (armcompute.VirtualMachine, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.vms[resourceGroup+"/"+name]
	if !ok {
		return armcompute.VirtualMachine{}, false
	}
	return v.model, true
}

// Server is the SDK fake server backed by this region.
func (c *Cloud) Server() *fake.VirtualMachinesServer {
	return &fake.VirtualMachinesServer{
		BeginCreateOrUpdate: c.create, Get: c.get, BeginDelete: c.delete,
		BeginDeallocate: c.deallocate, BeginStart: c.start, NewListPager: c.list,
	}
}

func (c *Cloud) create(_ context.Context, rg, name string, params armcompute.VirtualMachine, _ *armcompute.VirtualMachinesClientBeginCreateOrUpdateOptions) (resp azfake.PollerResponder[armcompute.VirtualMachinesClientCreateOrUpdateResponse], errResp azfake.ErrorResponder) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.failNext) > 0 {
		f := c.failNext[0]
		c.failNext = c.failNext[1:]
		errResp.SetResponseError(f.status, f.code)
		return
	}
	key := rg + "/" + name
	v, exists := c.vms[key]
	if !exists || v.deleting {
		params.ID = to.Ptr("/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/" + rg + "/providers/Microsoft.Compute/virtualMachines/" + name)
		params.Name = to.Ptr(name)
		if params.Properties == nil {
			params.Properties = &armcompute.VirtualMachineProperties{}
		}
		params.Properties.TimeCreated = to.Ptr(time.Now().UTC())
		params.Properties.VMID = to.Ptr(name + "-vmid")
		v = &vm{model: params, provision: "Creating"}
		c.vms[key] = v
	}
	model := v.view()
	resp.AddNonTerminalResponse(http.StatusCreated, nil)
	resp.SetTerminalResponse(http.StatusOK, armcompute.VirtualMachinesClientCreateOrUpdateResponse{VirtualMachine: model}, nil)
	return
}

// view is the VM as a GET shows it, with its instance view.
func (v *vm) view() armcompute.VirtualMachine {
	m := v.model
	props := *m.Properties
	props.ProvisioningState = to.Ptr(v.provision)
	statuses := []*armcompute.InstanceViewStatus{{Code: to.Ptr("ProvisioningState/" + v.provision)}}
	if v.power != "" {
		statuses = append(statuses, &armcompute.InstanceViewStatus{Code: to.Ptr("PowerState/" + v.power)})
	}
	props.InstanceView = &armcompute.VirtualMachineInstanceView{Statuses: statuses}
	m.Properties = &props
	return m
}

// advance moves states on after a read.
func (v *vm) advance() {
	switch {
	case v.provision == "Creating":
		v.provision, v.power = "Succeeded", "starting"
	case v.power == "starting":
		v.power = "running"
	case v.power == "deallocating":
		v.power = "deallocated"
	}
}

func notFound(errResp *azfake.ErrorResponder) {
	errResp.SetResponseError(http.StatusNotFound, "ResourceNotFound")
}

func (c *Cloud) get(_ context.Context, rg, name string, _ *armcompute.VirtualMachinesClientGetOptions) (resp azfake.Responder[armcompute.VirtualMachinesClientGetResponse], errResp azfake.ErrorResponder) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := rg + "/" + name
	v, ok := c.vms[key]
	if !ok {
		notFound(&errResp)
		return
	}
	if v.deleting && v.reads > 0 {
		delete(c.vms, key) // a finished delete: the VM is gone, its interface with it
		if props := v.model.Properties; props != nil && props.NetworkProfile != nil {
			for _, ref := range props.NetworkProfile.NetworkInterfaces {
				if ref.ID != nil {
					c.dropNIC(rg, *ref.ID)
				}
			}
		}
		notFound(&errResp)
		return
	}
	v.reads++
	resp.SetResponse(http.StatusOK, armcompute.VirtualMachinesClientGetResponse{VirtualMachine: v.view()}, nil)
	v.advance()
	return
}

func (c *Cloud) delete(_ context.Context, rg, name string, _ *armcompute.VirtualMachinesClientBeginDeleteOptions) (resp azfake.PollerResponder[armcompute.VirtualMachinesClientDeleteResponse], errResp azfake.ErrorResponder) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.vms[rg+"/"+name]
	if !ok {
		resp.SetTerminalResponse(http.StatusNoContent, armcompute.VirtualMachinesClientDeleteResponse{}, nil)
		return
	}
	v.deleting, v.provision, v.reads = true, "Deleting", 0
	resp.AddNonTerminalResponse(http.StatusAccepted, nil)
	resp.SetTerminalResponse(http.StatusOK, armcompute.VirtualMachinesClientDeleteResponse{}, nil)
	return
}

func (c *Cloud) powerChange(rg, name, power string, errResp *azfake.ErrorResponder) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.vms[rg+"/"+name]
	if !ok || v.deleting {
		notFound(errResp)
		return false
	}
	v.power = power
	return true
}

func (c *Cloud) deallocate(_ context.Context, rg, name string, _ *armcompute.VirtualMachinesClientBeginDeallocateOptions) (resp azfake.PollerResponder[armcompute.VirtualMachinesClientDeallocateResponse], errResp azfake.ErrorResponder) {
	if c.powerChange(rg, name, "deallocating", &errResp) {
		resp.AddNonTerminalResponse(http.StatusAccepted, nil)
		resp.SetTerminalResponse(http.StatusOK, armcompute.VirtualMachinesClientDeallocateResponse{}, nil)
	}
	return
}

func (c *Cloud) start(_ context.Context, rg, name string, _ *armcompute.VirtualMachinesClientBeginStartOptions) (resp azfake.PollerResponder[armcompute.VirtualMachinesClientStartResponse], errResp azfake.ErrorResponder) {
	if c.powerChange(rg, name, "starting", &errResp) {
		resp.AddNonTerminalResponse(http.StatusAccepted, nil)
		resp.SetTerminalResponse(http.StatusOK, armcompute.VirtualMachinesClientStartResponse{}, nil)
	}
	return
}

func (c *Cloud) list(rg string, _ *armcompute.VirtualMachinesClientListOptions) (resp azfake.PagerResponder[armcompute.VirtualMachinesClientListResponse]) {
	c.mu.Lock()
	defer c.mu.Unlock()
	keys := make([]string, 0, len(c.vms))
	for k := range c.vms {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var page []*armcompute.VirtualMachine
	flush := func() {
		resp.AddPage(http.StatusOK, armcompute.VirtualMachinesClientListResponse{VirtualMachineListResult: armcompute.VirtualMachineListResult{Value: page}}, nil)
		page = nil
	}
	for _, k := range keys {
		v := c.vms[k]
		if k[:len(rg)+1] != rg+"/" || (v.deleting && v.reads > 0) {
			continue
		}
		m := v.view()
		m.Properties.InstanceView = nil // list omits the instance view, as Azure does without expand
		page = append(page, &m)
		if len(page) == c.PageSize {
			flush()
		}
	}
	if len(page) > 0 || len(keys) == 0 {
		flush()
	}
	return
}
