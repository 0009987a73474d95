// Package gcp is the provider for Google Compute Engine, through
// cloud.google.com/go/compute (REST). Credentials come from Application
// Default Credentials; the region, project, image and network come from the
// cluster spec (spec.provider.region and spec.provider.config, see
// Settings). Provider ids are "zone/name".
//
// Instances carry Gantry's tags twice: as labels (sanitized to GCE's label
// rules, used to filter lists on the server) and exactly, as the
// "gantry-tags" metadata item (used to match). User data goes in the
// "user-data" metadata item, which cloud-init reads on GCE images.
//
// What is tested where: every call this provider makes is tested in CI
// against gcefake, an in-process fake of the compute/v1 REST API that the
// real client talks to (option.WithEndpoint + WithoutAuthentication),
// including operations, pagination and failed operations, and the
// provisioner contract suite runs against it. Nothing in CI reaches
// Google. GANTRY_GCP_E2E=1 runs the contract suite against a real project.
package gcp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/provisioner/cloudinit"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"
	"google.golang.org/protobuf/proto"
)

// Name is the provider's name in cluster specs.
const Name = "gcp"

// tagsItem is the metadata item holding the exact tags.
const tagsItem = "gantry-tags"

// Config is the provider's server-side configuration.
type Config struct {
	Project string
	Region  string
	// Zones of the region machines may use (default: -a, -b, -c).
	Zones []string
	// Endpoint and NoAuth point the client elsewhere (tests: gcefake).
	Endpoint string
	NoAuth   bool
	// HTTPClient, when set, is used for every call.
	HTTPClient *http.Client
	// TerminatedRetention: a deleted instance is gone in GCE; it is still
	// described as terminated for this long.
	TerminatedRetention time.Duration
}

// Provider is one project and region of Compute Engine.
type Provider struct {
	cfg         Config
	instances   *compute.InstancesClient
	operations  *compute.ZoneOperationsClient
	firewalls   *compute.FirewallsClient
	subnetworks *compute.SubnetworksClient
	routes      *compute.RoutesClient
	provisioner.Catalog

	mu   sync.Mutex
	gone map[string]provisioner.Instance
	// meshMade are the overlay firewall rules known to exist.
	meshMade map[string]bool
}

var (
	_ provisioner.Provisioner   = (*Provider)(nil)
	_ provisioner.ConsoleReader = (*Provider)(nil)
)

// New makes the clients; nothing is called until the first use.
func New(ctx context.Context, cfg Config) (*Provider, error) {
	if cfg.Project == "" || cfg.Region == "" {
		return nil, errors.New("gcp: spec.provider.region and spec.provider.config.project are required")
	}
	if len(cfg.Zones) == 0 {
		cfg.Zones = []string{cfg.Region + "-a", cfg.Region + "-b", cfg.Region + "-c"}
	}
	if cfg.TerminatedRetention == 0 {
		cfg.TerminatedRetention = time.Hour
	}
	var opts []option.ClientOption
	if cfg.Endpoint != "" {
		opts = append(opts, option.WithEndpoint(cfg.Endpoint))
	}
	if cfg.NoAuth {
		opts = append(opts, option.WithoutAuthentication())
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	instances, err := compute.NewInstancesRESTClient(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("gcp: instances client: %w", err)
	}
	operations, err := compute.NewZoneOperationsRESTClient(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("gcp: operations client: %w", err)
	}
	firewalls, err := compute.NewFirewallsRESTClient(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("gcp: firewalls client: %w", err)
	}
	subnetworks, err := compute.NewSubnetworksRESTClient(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("gcp: subnetworks client: %w", err)
	}
	routes, err := compute.NewRoutesRESTClient(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("gcp: routes client: %w", err)
	}
	return &Provider{cfg: cfg, instances: instances, operations: operations, firewalls: firewalls, subnetworks: subnetworks, routes: routes,
		Catalog: provisioner.Catalog{Types: Catalog(cfg.Zones)}, gone: map[string]provisioner.Instance{}, meshMade: map[string]bool{}}, nil
}

// Name implements provisioner.Provisioner.
func (p *Provider) Name() string { return Name }

// instanceName is the deterministic name of a launch: a retried launch
// finds the same instance (409 already exists).
func instanceName(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "gantry-" + hex.EncodeToString(sum[:8])
}

// requestID is the insert's idempotency UUID, derived from the key.
func requestID(key string) string {
	sum := sha256.Sum256([]byte("request/" + key))
	h := hex.EncodeToString(sum[:16])
	return h[0:8] + "-" + h[8:12] + "-4" + h[13:16] + "-8" + h[17:20] + "-" + h[20:32]
}

// Launch inserts an instance and waits for the insert operation (a zone
// out of resources fails there), then returns it while it is still
// provisioning.
func (p *Provider) Launch(ctx context.Context, spec provisioner.LaunchSpec) (*provisioner.Instance, error) {
	_, err := p.CheckLaunch(spec)
	if err != nil {
		return nil, err
	}
	s, err := ParseSettings(spec.Config)
	if err != nil {
		return nil, provisioner.Errorf(provisioner.KindInvalid, "launch", "%v", err)
	}
	zone := spec.Zone
	if zone == "" {
		zone = p.cfg.Zones[0]
	}
	resource, err := p.instanceResource(spec, s, zone)
	if err != nil {
		return nil, err
	}
	tag, err := p.meshNetworkTag(ctx, spec, s)
	if err != nil {
		return nil, err
	}
	if tag != "" {
		resource.Tags = &computepb.Tags{Items: []string{tag}}
	}
	op, err := p.instances.Insert(ctx, &computepb.InsertInstanceRequest{Project: p.cfg.Project, Zone: zone, InstanceResource: resource,
		RequestId: proto.String(requestID(spec.IdempotencyKey))})
	if err != nil && !isStatus(err, http.StatusConflict) {
		return nil, classify("launch", err)
	}
	if err == nil {
		if err := op.Wait(ctx); err != nil {
			return nil, classify("launch", err)
		}
	}
	// A failed route fails the launch; tried again, the launch finds the
	// same instance (409) and routes it.
	if err := p.routeSubnet(ctx, spec, s, zone, resource.GetName()); err != nil {
		return nil, err
	}
	inst, err := p.Describe(ctx, zone+"/"+resource.GetName())
	if err != nil {
		return nil, err
	}
	if inst.State == provisioner.StateRunning {
		inst.State = provisioner.StatePending
	}
	return inst, nil
}

func (p *Provider) instanceResource(spec provisioner.LaunchSpec, s Settings, zone string) (*computepb.Instance, error) {
	userData, err := cloudinit.Render(spec.Bootstrap, s.Agent, cloudinit.Machine{Zone: zone, InstanceIDCommand: cloudinit.GCPInstanceID})
	if err != nil {
		return nil, provisioner.Errorf(provisioner.KindInvalid, "launch", "user data: %v", err)
	}
	tags, _ := json.Marshal(spec.Tags)
	in := &computepb.Instance{
		Name:        proto.String(instanceName(spec.IdempotencyKey)),
		MachineType: proto.String(fmt.Sprintf("zones/%s/machineTypes/%s", zone, spec.InstanceType)),
		Labels:      labels(spec.Tags),
		Metadata: &computepb.Metadata{Items: []*computepb.Items{
			{Key: proto.String("user-data"), Value: proto.String(userData)},
			{Key: proto.String(tagsItem), Value: proto.String(string(tags))},
		}},
		Disks: []*computepb.AttachedDisk{{Boot: proto.Bool(true), AutoDelete: proto.Bool(true),
			InitializeParams: &computepb.AttachedDiskInitializeParams{SourceImage: proto.String(s.Image), DiskSizeGb: proto.Int64(s.DiskSizeGB)}}},
		NetworkInterfaces: []*computepb.NetworkInterface{{}},
		// Network mode routed: the machine's /24 is routed to it, which it
		// takes only when it may forward.
		CanIpForward: proto.Bool(spec.Bootstrap.NetworkMode == api.NetworkRouted),
	}
	if s.Subnetwork != "" {
		in.NetworkInterfaces[0].Subnetwork = proto.String(s.Subnetwork)
	} else {
		in.NetworkInterfaces[0].Network = proto.String(s.Network)
	}
	if s.ServiceAccount != "" {
		in.ServiceAccounts = []*computepb.ServiceAccount{{Email: proto.String(s.ServiceAccount), Scopes: []string{"https://www.googleapis.com/auth/cloud-platform"}}}
	}
	if spec.CapacityType == api.CapacitySpot {
		in.Scheduling = &computepb.Scheduling{ProvisioningModel: proto.String("SPOT"), InstanceTerminationAction: proto.String("DELETE")}
	}
	return in, nil
}

var labelUnsafe = regexp.MustCompile(`[^a-z0-9_-]`)

// labels sanitizes tags to GCE's label rules (lowercase letters, digits,
// _ and -; at most 63; keys start with a letter).
func labels(tags map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range tags {
		out[labelKey(k)] = labelValue(v)
	}
	return out
}

func labelKey(k string) string {
	k = labelUnsafe.ReplaceAllString(strings.ToLower(k), "_")
	if k == "" || k[0] < 'a' || k[0] > 'z' {
		k = "t" + k
	}
	return k[:min(len(k), 63)]
}

func labelValue(v string) string {
	v = labelUnsafe.ReplaceAllString(strings.ToLower(v), "_")
	return v[:min(len(v), 63)]
}

func splitID(id string) (zone, name string, ok bool) {
	zone, name, ok = strings.Cut(id, "/")
	return zone, name, ok && zone != "" && name != ""
}

// Terminate deletes the instance (not waited on); unknown is not an error.
func (p *Provider) Terminate(ctx context.Context, id string) error {
	zone, name, ok := splitID(id)
	if !ok {
		return nil
	}
	in, err := p.instances.Get(ctx, &computepb.GetInstanceRequest{Project: p.cfg.Project, Zone: zone, Instance: name})
	if err != nil {
		if err = classify("describe", err); errors.Is(err, provisioner.ErrNotFound) {
			return nil
		}
		return err
	}
	if in.GetCanIpForward() { // a machine of a routed cluster
		if err := p.unrouteSubnet(ctx, name); err != nil {
			return err
		}
	}
	inst := instanceOf(in, zone)
	if _, err := p.instances.Delete(ctx, &computepb.DeleteInstanceRequest{Project: p.cfg.Project, Zone: zone, Instance: name}); err != nil && !isStatus(err, http.StatusNotFound) {
		return classify("terminate", err)
	}
	inst.State, inst.Addresses = provisioner.StateTerminated, nil
	p.mu.Lock()
	p.gone[id] = inst
	p.mu.Unlock()
	return nil
}

// Stop implements provisioner.Provisioner.
func (p *Provider) Stop(ctx context.Context, id string) error {
	zone, name, ok := splitID(id)
	if !ok {
		return provisioner.Errorf(provisioner.KindNotFound, "stop", "instance %s", id)
	}
	_, err := p.instances.Stop(ctx, &computepb.StopInstanceRequest{Project: p.cfg.Project, Zone: zone, Instance: name})
	return classify("stop", err)
}

// Start implements provisioner.Provisioner.
func (p *Provider) Start(ctx context.Context, id string) (*provisioner.Instance, error) {
	zone, name, ok := splitID(id)
	if !ok {
		return nil, provisioner.Errorf(provisioner.KindNotFound, "start", "instance %s", id)
	}
	if _, err := p.instances.Start(ctx, &computepb.StartInstanceRequest{Project: p.cfg.Project, Zone: zone, Instance: name}); err != nil {
		return nil, classify("start", err)
	}
	return p.Describe(ctx, id)
}

// Describe implements provisioner.Provisioner; a deleted instance is
// terminated for TerminatedRetention, then not found.
func (p *Provider) Describe(ctx context.Context, id string) (*provisioner.Instance, error) {
	zone, name, ok := splitID(id)
	if !ok {
		return nil, provisioner.Errorf(provisioner.KindNotFound, "describe", "instance %s", id)
	}
	in, err := p.instances.Get(ctx, &computepb.GetInstanceRequest{Project: p.cfg.Project, Zone: zone, Instance: name})
	if err != nil {
		err = classify("describe", err)
		if errors.Is(err, provisioner.ErrNotFound) {
			if inst, ok := p.tombstone(id); ok {
				return &inst, nil
			}
		}
		return nil, err
	}
	inst := instanceOf(in, zone)
	return &inst, nil
}

func (p *Provider) tombstone(id string) (provisioner.Instance, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	inst, ok := p.gone[id]
	return inst, ok
}

// List implements provisioner.Provisioner: label filters go to the API,
// every zone and page is read, tags are matched exactly.
func (p *Provider) List(ctx context.Context, filter provisioner.Filter) ([]provisioner.Instance, error) {
	var terms []string
	for k, v := range labels(filter.Tags) {
		terms = append(terms, fmt.Sprintf("(labels.%s = %q)", k, v))
	}
	seen := map[string]bool{}
	var out []provisioner.Instance
	for _, zone := range p.cfg.Zones {
		req := &computepb.ListInstancesRequest{Project: p.cfg.Project, Zone: zone}
		if len(terms) > 0 {
			req.Filter = proto.String(strings.Join(terms, " AND "))
		}
		it := p.instances.List(ctx, req)
		for {
			in, err := it.Next()
			if errors.Is(err, iterator.Done) {
				break
			}
			if err != nil {
				return nil, classify("list", err)
			}
			inst := instanceOf(in, zone)
			seen[inst.ID] = true
			if filter.Matches(inst) {
				out = append(out, inst)
			}
		}
	}
	p.mu.Lock()
	for id, inst := range p.gone {
		if !seen[id] && filter.Matches(inst) {
			out = append(out, inst)
		}
	}
	p.mu.Unlock()
	return out, nil
}

// ConsoleOutput implements provisioner.ConsoleReader (serial port 1).
func (p *Provider) ConsoleOutput(ctx context.Context, id string) (string, error) {
	zone, name, ok := splitID(id)
	if !ok {
		return "", provisioner.Errorf(provisioner.KindNotFound, "console", "instance %s", id)
	}
	out, err := p.instances.GetSerialPortOutput(ctx, &computepb.GetSerialPortOutputInstanceRequest{Project: p.cfg.Project, Zone: zone, Instance: name, Port: proto.Int32(1)})
	if err != nil {
		return "", classify("console", err)
	}
	return out.GetContents(), nil
}

// instanceOf normalizes a Compute Engine instance.
func instanceOf(in *computepb.Instance, zone string) provisioner.Instance {
	inst := provisioner.Instance{ID: zone + "/" + in.GetName(), State: stateOf(in.GetStatus()), Zone: zone,
		InstanceType: in.GetMachineType()[strings.LastIndex(in.GetMachineType(), "/")+1:], CapacityType: api.CapacityOnDemand, Tags: map[string]string{}}
	if in.GetScheduling().GetProvisioningModel() == "SPOT" {
		inst.CapacityType = api.CapacitySpot
	}
	if t, err := time.Parse(time.RFC3339, in.GetCreationTimestamp()); err == nil {
		inst.LaunchedAt = t.UTC()
	}
	for _, item := range in.GetMetadata().GetItems() {
		if item.GetKey() == tagsItem {
			_ = json.Unmarshal([]byte(item.GetValue()), &inst.Tags)
		}
	}
	if inst.State == provisioner.StateRunning {
		for _, ni := range in.GetNetworkInterfaces() {
			if ip := ni.GetNetworkIP(); ip != "" {
				inst.Addresses = append(inst.Addresses, ip)
			}
		}
	}
	return inst
}

// stateOf maps GCE statuses (TERMINATED is GCE's word for stopped).
func stateOf(s string) provisioner.State {
	switch s {
	case "RUNNING":
		return provisioner.StateRunning
	case "STOPPING", "SUSPENDING":
		return provisioner.StateStopping
	case "TERMINATED", "STOPPED", "SUSPENDED":
		return provisioner.StateStopped
	}
	return provisioner.StatePending // PROVISIONING, STAGING, REPAIRING, unknown
}
