// Package azure is the provider for Azure virtual machines, through
// armcompute. Credentials come from azidentity's default chain; the
// location comes from spec.provider.region and the subscription, resource
// group, image, subnet and SSH key from spec.provider.config (see
// Settings). Provider ids are VM names; zones are "<location>-<1|2|3>".
//
// Azure tag names may not contain '/', so Gantry's tags are written with
// ':' in its place (and read back the other way). A VM's network interface
// is made with it (network API version 2020-11-01) and deleted with it;
// in network mode routed it is made ahead, through armnetwork, so that a
// user-defined route can name its address (routes.go).
//
// What is tested where: every call this provider makes is tested in CI
// against the SDK's own fake servers (armcompute/fake, armnetwork/fake), backed by an
// in-memory region (azurefake) with Azure's provisioning and power states,
// paging and error codes; the provisioner contract suite runs against it.
// Nothing in CI reaches Azure. Boot diagnostics (console output) are not
// fetched. GANTRY_AZURE_E2E=1 runs the contract suite against a real
// subscription.
package azure

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6"
	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/provisioner/cloudinit"
)

// Name is the provider's name in cluster specs.
const Name = "azure"

// Config is one location, subscription and resource group.
type Config struct {
	Location       string
	SubscriptionID string
	ResourceGroup  string
	Credential     azcore.TokenCredential
	// ClientOptions, when set, configure the client (tests: the SDK's
	// fake transport); NetworkClientOptions the network clients (network
	// mode routed), ClientOptions when nil.
	ClientOptions        *arm.ClientOptions
	NetworkClientOptions *arm.ClientOptions
}

// Provider manages VMs in one resource group.
type Provider struct {
	cfg    Config
	vms    *armcompute.VirtualMachinesClient
	nics   *armnetwork.InterfacesClient
	routes *armnetwork.RoutesClient
	provisioner.Catalog

	mu   sync.Mutex
	gone map[string]provisioner.Instance // deleted VMs, still described as terminated
}

var _ provisioner.Provisioner = (*Provider)(nil)

// New makes the client; nothing is called until the first use.
func New(cfg Config) (*Provider, error) {
	if cfg.Location == "" || cfg.SubscriptionID == "" || cfg.ResourceGroup == "" {
		return nil, errors.New("azure: location, subscription and resource group are required")
	}
	vms, err := armcompute.NewVirtualMachinesClient(cfg.SubscriptionID, cfg.Credential, cfg.ClientOptions)
	if err != nil {
		return nil, fmt.Errorf("azure: virtual machines client: %w", err)
	}
	netOpts := cfg.NetworkClientOptions
	if netOpts == nil {
		netOpts = cfg.ClientOptions
	}
	nics, err := armnetwork.NewInterfacesClient(cfg.SubscriptionID, cfg.Credential, netOpts)
	if err != nil {
		return nil, fmt.Errorf("azure: network interfaces client: %w", err)
	}
	routes, err := armnetwork.NewRoutesClient(cfg.SubscriptionID, cfg.Credential, netOpts)
	if err != nil {
		return nil, fmt.Errorf("azure: routes client: %w", err)
	}
	return &Provider{cfg: cfg, vms: vms, nics: nics, routes: routes, Catalog: provisioner.Catalog{Types: Catalog(cfg.Location)}, gone: map[string]provisioner.Instance{}}, nil
}

// Name implements provisioner.Provisioner.
func (p *Provider) Name() string { return Name }

// vmName is deterministic per launch key: a retried create (a PUT) is the
// same VM.
func vmName(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "gantry-" + hex.EncodeToString(sum[:8])
}

// Launch starts creating the VM and returns it pending; Azure's
// allocation failures show later as a failed provisioning state.
func (p *Provider) Launch(ctx context.Context, spec provisioner.LaunchSpec) (*provisioner.Instance, error) {
	_, err := p.CheckLaunch(spec)
	if err != nil {
		return nil, err
	}
	s, err := ParseSettings(spec.Config)
	if err != nil {
		return nil, provisioner.Errorf(provisioner.KindInvalid, "launch", "%v", err)
	}
	for k := range spec.Tags {
		if strings.ContainsAny(k, "<>%&\\?:") {
			return nil, provisioner.Errorf(provisioner.KindInvalid, "launch", "tag %q: Azure tag names may not contain <>%%&\\?: (and / is written as :)", k)
		}
	}
	name := vmName(spec.IdempotencyKey)
	model, err := p.vmModel(name, spec, s)
	if err != nil {
		return nil, err
	}
	if spec.Bootstrap.NetworkMode == api.NetworkRouted {
		nic, err := p.routedInterface(ctx, name, spec, s)
		if err != nil {
			return nil, err
		}
		model.Properties.NetworkProfile = &armcompute.NetworkProfile{NetworkInterfaces: []*armcompute.NetworkInterfaceReference{nic}}
		model.Tags[encodeTagKey(provisioner.TagRouteTable)] = to.Ptr(s.RouteTable)
	}
	if _, err := p.vms.BeginCreateOrUpdate(ctx, p.cfg.ResourceGroup, name, model, nil); err != nil {
		return nil, classify("launch", err)
	}
	inst, err := p.Describe(ctx, name)
	if err != nil {
		return nil, err
	}
	if inst.State == provisioner.StateRunning {
		inst.State = provisioner.StatePending
	}
	return inst, nil
}

func (p *Provider) vmModel(name string, spec provisioner.LaunchSpec, s Settings) (armcompute.VirtualMachine, error) {
	userData, err := cloudinit.Render(spec.Bootstrap, s.Agent, cloudinit.Machine{Zone: spec.Zone, InstanceIDCommand: cloudinit.AzureInstanceID})
	if err != nil {
		return armcompute.VirtualMachine{}, provisioner.Errorf(provisioner.KindInvalid, "launch", "user data: %v", err)
	}
	image := &armcompute.ImageReference{}
	if strings.HasPrefix(s.Image, "/") {
		image.ID = to.Ptr(s.Image)
	} else {
		parts := strings.Split(s.Image, ":")
		image.Publisher, image.Offer, image.SKU, image.Version = &parts[0], &parts[1], &parts[2], &parts[3]
	}
	vm := armcompute.VirtualMachine{
		Location: to.Ptr(p.cfg.Location),
		Tags:     encodeTags(spec.Tags),
		Properties: &armcompute.VirtualMachineProperties{
			HardwareProfile: &armcompute.HardwareProfile{VMSize: to.Ptr(armcompute.VirtualMachineSizeTypes(spec.InstanceType))},
			StorageProfile: &armcompute.StorageProfile{ImageReference: image,
				OSDisk: &armcompute.OSDisk{CreateOption: to.Ptr(armcompute.DiskCreateOptionTypesFromImage), DeleteOption: to.Ptr(armcompute.DiskDeleteOptionTypesDelete)}},
			OSProfile: &armcompute.OSProfile{ComputerName: to.Ptr(name), AdminUsername: to.Ptr(s.AdminUsername),
				CustomData: to.Ptr(base64.StdEncoding.EncodeToString([]byte(userData))),
				LinuxConfiguration: &armcompute.LinuxConfiguration{DisablePasswordAuthentication: to.Ptr(true),
					SSH: &armcompute.SSHConfiguration{PublicKeys: []*armcompute.SSHPublicKey{{Path: to.Ptr("/home/" + s.AdminUsername + "/.ssh/authorized_keys"), KeyData: to.Ptr(s.SSHPublicKey)}}}}},
			NetworkProfile: &armcompute.NetworkProfile{
				NetworkAPIVersion: to.Ptr(armcompute.NetworkAPIVersionTwoThousandTwenty1101),
				NetworkInterfaceConfigurations: []*armcompute.VirtualMachineNetworkInterfaceConfiguration{{
					Name: to.Ptr(name + "-nic"),
					Properties: &armcompute.VirtualMachineNetworkInterfaceConfigurationProperties{
						Primary: to.Ptr(true), DeleteOption: to.Ptr(armcompute.DeleteOptionsDelete),
						IPConfigurations: []*armcompute.VirtualMachineNetworkInterfaceIPConfiguration{{Name: to.Ptr("ipconfig1"),
							Properties: &armcompute.VirtualMachineNetworkInterfaceIPConfigurationProperties{Subnet: &armcompute.SubResource{ID: to.Ptr(s.SubnetID)}}}},
					},
				}},
			},
		},
	}
	if zone, ok := strings.CutPrefix(spec.Zone, p.cfg.Location+"-"); ok {
		vm.Zones = []*string{to.Ptr(zone)}
	}
	if spec.CapacityType == api.CapacitySpot {
		vm.Properties.Priority = to.Ptr(armcompute.VirtualMachinePriorityTypesSpot)
		vm.Properties.EvictionPolicy = to.Ptr(armcompute.VirtualMachineEvictionPolicyTypesDelete)
		vm.Properties.BillingProfile = &armcompute.BillingProfile{MaxPrice: to.Ptr(-1.0)}
	}
	return vm, nil
}

// Terminate starts deleting the VM (with its disk and NIC); unknown is not
// an error.
func (p *Provider) Terminate(ctx context.Context, id string) error {
	inst, err := p.Describe(ctx, id)
	if errors.Is(err, provisioner.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := p.unroute(ctx, id, inst.Tags); err != nil {
		return err
	}
	if _, err := p.vms.BeginDelete(ctx, p.cfg.ResourceGroup, id, nil); err != nil && !isStatus(err, http.StatusNotFound) {
		return classify("terminate", err)
	}
	inst.State, inst.Addresses = provisioner.StateTerminated, nil
	p.mu.Lock()
	p.gone[id] = *inst
	p.mu.Unlock()
	return nil
}

// Stop deallocates the VM (no compute billed while stopped).
func (p *Provider) Stop(ctx context.Context, id string) error {
	_, err := p.vms.BeginDeallocate(ctx, p.cfg.ResourceGroup, id, nil)
	return classify("stop", err)
}

// Start implements provisioner.Provisioner.
func (p *Provider) Start(ctx context.Context, id string) (*provisioner.Instance, error) {
	if _, err := p.vms.BeginStart(ctx, p.cfg.ResourceGroup, id, nil); err != nil {
		return nil, classify("start", err)
	}
	return p.Describe(ctx, id)
}

// Describe implements provisioner.Provisioner. A deleted VM is gone in
// Azure: it is reported terminated once its delete has been asked for
// and not found thereafter.
func (p *Provider) Describe(ctx context.Context, id string) (*provisioner.Instance, error) {
	resp, err := p.vms.Get(ctx, p.cfg.ResourceGroup, id, &armcompute.VirtualMachinesClientGetOptions{Expand: to.Ptr(armcompute.InstanceViewTypesInstanceView)})
	if err != nil {
		err = classify("describe", err)
		p.mu.Lock()
		inst, ok := p.gone[id]
		p.mu.Unlock()
		if ok && errors.Is(err, provisioner.ErrNotFound) {
			return &inst, nil
		}
		return nil, err
	}
	inst := p.instanceOf(resp.VirtualMachine)
	return &inst, nil
}

// List reads every page of the resource group's VMs, matches tags, and
// describes the matches for their power state.
func (p *Provider) List(ctx context.Context, filter provisioner.Filter) ([]provisioner.Instance, error) {
	var out []provisioner.Instance
	seen := map[string]bool{}
	pager := p.vms.NewListPager(p.cfg.ResourceGroup, nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, classify("list", err)
		}
		for _, vm := range page.Value {
			if !tagsMatch(decodeTags(vm.Tags), filter.Tags) {
				continue
			}
			seen[str(vm.Name)] = true
			inst, err := p.Describe(ctx, str(vm.Name))
			if errors.Is(err, provisioner.ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, err
			}
			if filter.Matches(*inst) {
				out = append(out, *inst)
			}
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, inst := range p.gone {
		if !seen[id] && filter.Matches(inst) {
			out = append(out, inst)
		}
	}
	return out, nil
}

func tagsMatch(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func (p *Provider) instanceOf(vm armcompute.VirtualMachine) provisioner.Instance {
	inst := provisioner.Instance{ID: str(vm.Name), Tags: decodeTags(vm.Tags), CapacityType: api.CapacityOnDemand, State: provisioner.StatePending}
	if len(vm.Zones) > 0 {
		inst.Zone = p.cfg.Location + "-" + str(vm.Zones[0])
	}
	props := vm.Properties
	if props == nil {
		return inst
	}
	if props.HardwareProfile != nil && props.HardwareProfile.VMSize != nil {
		inst.InstanceType = string(*props.HardwareProfile.VMSize)
	}
	if props.Priority != nil && *props.Priority == armcompute.VirtualMachinePriorityTypesSpot {
		inst.CapacityType = api.CapacitySpot
	}
	if props.TimeCreated != nil {
		inst.LaunchedAt = props.TimeCreated.UTC()
	}
	inst.State = stateOf(str(props.ProvisioningState), powerState(props.InstanceView))
	if inst.State == provisioner.StateRunning {
		inst.Addresses = []string{inst.ID} // the VM's hostname in its virtual network
	}
	return inst
}

func powerState(view *armcompute.VirtualMachineInstanceView) string {
	if view == nil {
		return ""
	}
	for _, s := range view.Statuses {
		if code, ok := strings.CutPrefix(str(s.Code), "PowerState/"); ok {
			return code
		}
	}
	return ""
}

// stateOf maps Azure's provisioning and power states.
func stateOf(provisioning, power string) provisioner.State {
	switch {
	case provisioning == "Deleting":
		return provisioner.StateTerminating
	case provisioning == "Failed":
		return provisioner.StateTerminated
	case power == "running":
		return provisioner.StateRunning
	case power == "stopping" || power == "deallocating":
		return provisioner.StateStopping
	case power == "stopped" || power == "deallocated":
		return provisioner.StateStopped
	}
	return provisioner.StatePending // Creating, starting, unknown
}

func encodeTags(tags map[string]string) map[string]*string {
	out := map[string]*string{}
	for k, v := range tags {
		out[encodeTagKey(k)] = to.Ptr(v)
	}
	return out
}

func encodeTagKey(k string) string { return strings.ReplaceAll(k, "/", ":") }

func decodeTags(tags map[string]*string) map[string]string {
	out := map[string]string{}
	for k, v := range tags {
		out[strings.ReplaceAll(k, ":", "/")] = str(v)
	}
	return out
}

func isStatus(err error, status int) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && re.StatusCode == status
}

// capacityCodes are ARM error codes meaning "not now, not here".
var capacityCodes = map[string]bool{"SkuNotAvailable": true, "ZonalAllocationFailed": true, "AllocationFailed": true,
	"OverconstrainedAllocationRequest": true, "OverconstrainedZonalAllocationRequest": true, "OperationNotAllowed": true}

// classify types an ARM error.
func classify(op string, err error) error {
	if err == nil {
		return nil
	}
	kind := provisioner.KindTransport
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		switch {
		case capacityCodes[re.ErrorCode]:
			kind = provisioner.KindInsufficientCapacity
		case re.StatusCode == http.StatusNotFound:
			kind = provisioner.KindNotFound
		case re.StatusCode == http.StatusUnauthorized || re.StatusCode == http.StatusForbidden:
			kind = provisioner.KindAuth
		case re.StatusCode == http.StatusBadRequest:
			kind = provisioner.KindInvalid
		}
	}
	return &provisioner.Error{Kind: kind, Op: op, Err: err}
}
