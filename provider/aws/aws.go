// Package aws is the provider for Amazon EC2, through aws-sdk-go-v2.
// Credentials come only from the SDK's default chain (environment, shared
// config, SSO, instance role); the region and launch settings come from
// the cluster spec (spec.provider.region and spec.provider.config, see
// Settings).
//
// What is tested where: every call this provider makes (RunInstances,
// DescribeInstances, Terminate/Stop/StartInstances, GetConsoleOutput) is
// tested in CI against ec2fake, an in-process fake of the EC2 Query API
// that the real SDK talks to, including errors, pagination and eventual
// consistency, and the provisioner contract suite runs against it. Nothing
// in CI reaches AWS. GANTRY_AWS_E2E=1 runs the contract suite against a
// real account (see aws_e2e_test.go); it launches and terminates real
// instances.
package aws

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/provider/aws/awscatalog"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/provisioner/cloudinit"
)

// Name is the provider's name in cluster specs.
const Name = "aws"

// Config is the provider's server-side configuration.
type Config struct {
	Region string
	// Endpoint overrides the EC2 endpoint (tests point it at ec2fake).
	Endpoint string
	// MaxAttempts is the SDK's attempts per call; throttling and transient
	// errors are retried with its exponential backoff.
	MaxAttempts int
	// ConsistencyGrace is how long after a launch an instance EC2 does not
	// show yet is taken as pending, not gone (EC2 is eventually
	// consistent).
	ConsistencyGrace time.Duration
	// Zones offered (default: the region's a, b and c).
	Zones []string
}

// DefaultConfig returns the defaults for a region.
func DefaultConfig(region string) Config {
	return Config{Region: region, MaxAttempts: 5, ConsistencyGrace: 2 * time.Minute}
}

// Provider is one region of EC2.
type Provider struct {
	cfg    Config
	client *ec2.Client
	provisioner.Catalog

	mu     sync.Mutex
	recent map[string]provisioner.Instance // launched within the grace
}

var (
	_ provisioner.Provisioner   = (*Provider)(nil)
	_ provisioner.ConsoleReader = (*Provider)(nil)
)

// New loads credentials from the SDK's default chain; nothing is called
// until the first use.
func New(ctx context.Context, cfg Config) (*Provider, error) {
	if cfg.Region == "" {
		return nil, errors.New("aws: spec.provider.region is required")
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion(cfg.Region), awsconfig.WithRetryer(func() awssdk.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) { o.MaxAttempts = max(cfg.MaxAttempts, 1) })
	}))
	if err != nil {
		return nil, fmt.Errorf("aws: load SDK configuration: %w", err)
	}
	client := ec2.NewFromConfig(awsCfg, func(o *ec2.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = awssdk.String(cfg.Endpoint)
		}
	})
	file, err := awscatalog.Builtin()
	if err != nil {
		return nil, err
	}
	return &Provider{cfg: cfg, client: client, Catalog: provisioner.Catalog{Types: file.Catalog(cfg.Region, cfg.Zones)}, recent: map[string]provisioner.Instance{}}, nil
}

// Name implements provisioner.Provisioner.
func (p *Provider) Name() string { return Name }

// Launch runs one instance, tagged at launch, with the launch key as the
// client token: a retried launch returns the same instance.
func (p *Provider) Launch(ctx context.Context, spec provisioner.LaunchSpec) (*provisioner.Instance, error) {
	_, err := p.CheckLaunch(spec)
	if err != nil {
		return nil, err
	}
	settings, err := ParseSettings(spec.Config)
	if err != nil {
		return nil, provisioner.Errorf(provisioner.KindInvalid, "launch", "%v", err)
	}
	input, err := p.runInput(spec, settings)
	if err != nil {
		return nil, err
	}
	mesh, err := p.meshGroup(ctx, spec, settings)
	if err != nil {
		return nil, err
	}
	if mesh != "" {
		input.SecurityGroupIds = append(input.SecurityGroupIds, mesh)
	}
	out, err := p.client.RunInstances(ctx, input)
	if err != nil {
		return nil, classify("launch", err)
	}
	if len(out.Instances) != 1 {
		return nil, provisioner.Errorf(provisioner.KindTransport, "launch", "RunInstances returned %d instances", len(out.Instances))
	}
	inst := instanceOf(out.Instances[0])
	// A failed route fails the launch; tried again, the launch (same
	// client token) finds the same instance and routes it.
	if err := p.routeSubnet(ctx, inst.ID, spec, settings); err != nil {
		return nil, err
	}
	if inst.State == provisioner.StateRunning {
		inst.State = provisioner.StatePending // an idempotent retry may find it running; the contract says pending
	}
	p.mu.Lock()
	p.recent[inst.ID] = inst
	p.mu.Unlock()
	return &inst, nil
}

func (p *Provider) runInput(spec provisioner.LaunchSpec, s Settings) (*ec2.RunInstancesInput, error) {
	userData, err := cloudinit.Render(spec.Bootstrap, s.Agent, cloudinit.Machine{Zone: spec.Zone, InstanceIDCommand: cloudinit.AWSInstanceID})
	if err != nil {
		return nil, provisioner.Errorf(provisioner.KindInvalid, "launch", "user data: %v", err)
	}
	tags := make([]types.Tag, 0, len(spec.Tags)+1)
	for _, k := range sortedKeys(spec.Tags) {
		tags = append(tags, types.Tag{Key: awssdk.String(k), Value: awssdk.String(spec.Tags[k])})
	}
	if spec.Bootstrap.NetworkMode == api.NetworkRouted && s.RouteTableID != "" {
		tags = append(tags, types.Tag{Key: awssdk.String(provisioner.TagRouteTable), Value: awssdk.String(s.RouteTableID)})
	}
	input := &ec2.RunInstancesInput{
		MinCount: awssdk.Int32(1), MaxCount: awssdk.Int32(1), ClientToken: awssdk.String(spec.IdempotencyKey),
		InstanceType: types.InstanceType(spec.InstanceType), UserData: awssdk.String(base64.StdEncoding.EncodeToString([]byte(userData))),
		TagSpecifications: []types.TagSpecification{
			{ResourceType: types.ResourceTypeInstance, Tags: tags},
			{ResourceType: types.ResourceTypeVolume, Tags: tags},
		},
	}
	if s.ImageID != "" {
		input.ImageId = awssdk.String(s.ImageID)
	}
	if s.LaunchTemplate != "" {
		lt := &types.LaunchTemplateSpecification{Version: awssdk.String(cmp.Or(s.LaunchTemplateVersion, "$Default"))}
		if len(s.LaunchTemplate) > 3 && s.LaunchTemplate[:3] == "lt-" {
			lt.LaunchTemplateId = awssdk.String(s.LaunchTemplate)
		} else {
			lt.LaunchTemplateName = awssdk.String(s.LaunchTemplate)
		}
		input.LaunchTemplate = lt
	}
	if spec.Zone != "" {
		input.Placement = &types.Placement{AvailabilityZone: awssdk.String(spec.Zone)}
		if subnet, ok := s.Subnets[spec.Zone]; ok {
			input.SubnetId = awssdk.String(subnet)
		} else if len(s.Subnets) > 0 {
			return nil, provisioner.Errorf(provisioner.KindInsufficientCapacity, "launch", "no subnet configured for zone %s", spec.Zone)
		}
	}
	if len(s.SecurityGroupIDs) > 0 {
		input.SecurityGroupIds = s.SecurityGroupIDs
	}
	if s.InstanceProfile != "" {
		input.IamInstanceProfile = &types.IamInstanceProfileSpecification{Name: awssdk.String(s.InstanceProfile)}
	}
	if spec.CapacityType == api.CapacitySpot {
		input.InstanceMarketOptions = &types.InstanceMarketOptionsRequest{MarketType: types.MarketTypeSpot,
			SpotOptions: &types.SpotMarketOptions{SpotInstanceType: types.SpotInstanceTypeOneTime, InstanceInterruptionBehavior: types.InstanceInterruptionBehaviorTerminate}}
	}
	return input, nil
}

// Terminate implements provisioner.Provisioner; an unknown instance is not
// an error.
func (p *Provider) Terminate(ctx context.Context, id string) error {
	if err := p.unrouteSubnet(ctx, id); err != nil {
		return err
	}
	_, err := p.client.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}})
	if err != nil && !errors.Is(classify("terminate", err), provisioner.ErrNotFound) {
		return classify("terminate", err)
	}
	return nil
}

// Stop implements provisioner.Provisioner.
func (p *Provider) Stop(ctx context.Context, id string) error {
	_, err := p.client.StopInstances(ctx, &ec2.StopInstancesInput{InstanceIds: []string{id}})
	return classify("stop", err)
}

// Start implements provisioner.Provisioner.
func (p *Provider) Start(ctx context.Context, id string) (*provisioner.Instance, error) {
	if _, err := p.client.StartInstances(ctx, &ec2.StartInstancesInput{InstanceIds: []string{id}}); err != nil {
		return nil, classify("start", err)
	}
	return p.Describe(ctx, id)
}

// Describe implements provisioner.Provisioner. An instance launched within
// the consistency grace that EC2 does not show yet is pending.
func (p *Provider) Describe(ctx context.Context, id string) (*provisioner.Instance, error) {
	out, err := p.client.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		err = classify("describe", err)
		if errors.Is(err, provisioner.ErrNotFound) {
			if inst, ok := p.stillConsistent(id); ok {
				return &inst, nil
			}
		}
		return nil, err
	}
	for _, r := range out.Reservations {
		for _, i := range r.Instances {
			inst := instanceOf(i)
			return &inst, nil
		}
	}
	if inst, ok := p.stillConsistent(id); ok {
		return &inst, nil
	}
	return nil, provisioner.Errorf(provisioner.KindNotFound, "describe", "instance %s", id)
}

// stillConsistent is a recent launch EC2 may not show yet.
func (p *Provider) stillConsistent(id string) (provisioner.Instance, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	inst, ok := p.recent[id]
	if !ok || time.Since(inst.LaunchedAt) > p.cfg.ConsistencyGrace {
		delete(p.recent, id)
		return provisioner.Instance{}, false
	}
	inst.State = provisioner.StatePending
	return inst, true
}

// List implements provisioner.Provisioner: tag filters go to EC2, pages are
// followed, and recent launches EC2 does not list yet are added.
func (p *Provider) List(ctx context.Context, filter provisioner.Filter) ([]provisioner.Instance, error) {
	var filters []types.Filter
	for _, k := range sortedKeys(filter.Tags) {
		filters = append(filters, types.Filter{Name: awssdk.String("tag:" + k), Values: []string{filter.Tags[k]}})
	}
	seen := map[string]bool{}
	var out []provisioner.Instance
	pages := ec2.NewDescribeInstancesPaginator(p.client, &ec2.DescribeInstancesInput{Filters: filters})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, classify("list", err)
		}
		for _, r := range page.Reservations {
			for _, i := range r.Instances {
				inst := instanceOf(i)
				seen[inst.ID] = true
				if filter.Matches(inst) {
					out = append(out, inst)
				}
			}
		}
	}
	p.mu.Lock()
	for id, inst := range p.recent {
		if !seen[id] && time.Since(inst.LaunchedAt) <= p.cfg.ConsistencyGrace {
			inst.State = provisioner.StatePending
			if filter.Matches(inst) {
				out = append(out, inst)
			}
		}
	}
	p.mu.Unlock()
	return out, nil
}

// ConsoleOutput implements provisioner.ConsoleReader.
func (p *Provider) ConsoleOutput(ctx context.Context, id string) (string, error) {
	out, err := p.client.GetConsoleOutput(ctx, &ec2.GetConsoleOutputInput{InstanceId: awssdk.String(id), Latest: awssdk.Bool(true)})
	if err != nil {
		return "", classify("console", err)
	}
	data, err := base64.StdEncoding.DecodeString(awssdk.ToString(out.Output))
	if err != nil {
		return "", provisioner.Errorf(provisioner.KindTransport, "console", "decode console output: %v", err)
	}
	return string(data), nil
}

// instanceOf normalizes an EC2 instance.
func instanceOf(i types.Instance) provisioner.Instance {
	inst := provisioner.Instance{ID: awssdk.ToString(i.InstanceId), InstanceType: string(i.InstanceType), Tags: map[string]string{},
		CapacityType: api.CapacityOnDemand, LaunchedAt: awssdk.ToTime(i.LaunchTime)}
	if i.State != nil {
		inst.State = stateOf(i.State.Name)
	}
	if i.Placement != nil {
		inst.Zone = awssdk.ToString(i.Placement.AvailabilityZone)
	}
	if i.InstanceLifecycle == types.InstanceLifecycleTypeSpot {
		inst.CapacityType = api.CapacitySpot
	}
	if ip := awssdk.ToString(i.PrivateIpAddress); ip != "" {
		inst.Addresses = append(inst.Addresses, ip)
	}
	for _, t := range i.Tags {
		inst.Tags[awssdk.ToString(t.Key)] = awssdk.ToString(t.Value)
	}
	return inst
}

// stateOf maps EC2 states; an unknown one is pending.
func stateOf(s types.InstanceStateName) provisioner.State {
	switch s {
	case types.InstanceStateNameRunning:
		return provisioner.StateRunning
	case types.InstanceStateNameStopping:
		return provisioner.StateStopping
	case types.InstanceStateNameStopped:
		return provisioner.StateStopped
	case types.InstanceStateNameShuttingDown:
		return provisioner.StateTerminating
	case types.InstanceStateNameTerminated:
		return provisioner.StateTerminated
	}
	return provisioner.StatePending
}
