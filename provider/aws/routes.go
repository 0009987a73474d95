package aws

import (
	"context"
	"errors"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/provisioner"
)

// Routes says whether a cluster's settings let EC2 route each machine's
// /24 to it (network mode routed): they name the route table of the
// machines' subnets.
func Routes(p api.ProviderSpec) error {
	s, err := ParseSettings(p.Config)
	if err != nil {
		return err
	}
	if s.RouteTableID == "" {
		return errors.New("spec.provider.config.routeTableId: required for network mode routed on aws (the route table of the machines' subnets, which gets a route for each machine's /24)")
	}
	return nil
}

// routeSubnet routes the machine's /24 to the instance in a cluster of
// network mode routed: the instance forwards what is not its own (source
// and destination check off), and the route table sends the /24 to it. A
// route an instance gone left for the /24 (a blackhole) is replaced.
func (p *Provider) routeSubnet(ctx context.Context, id string, spec provisioner.LaunchSpec, s Settings) error {
	if spec.Bootstrap.NetworkMode != api.NetworkRouted {
		return nil
	}
	if spec.Subnet == "" || s.RouteTableID == "" {
		return provisioner.Errorf(provisioner.KindInvalid, "route", "network mode routed needs the machine's /24 and spec.provider.config.routeTableId")
	}
	_, err := p.client.ModifyInstanceAttribute(ctx, &ec2.ModifyInstanceAttributeInput{InstanceId: awssdk.String(id),
		SourceDestCheck: &types.AttributeBooleanValue{Value: awssdk.Bool(false)}})
	if err != nil {
		return classify("turn off the source/destination check", err)
	}
	_, err = p.client.CreateRoute(ctx, &ec2.CreateRouteInput{RouteTableId: awssdk.String(s.RouteTableID),
		DestinationCidrBlock: awssdk.String(spec.Subnet), InstanceId: awssdk.String(id)})
	if apiCode(err) == "RouteAlreadyExists" {
		_, err = p.client.ReplaceRoute(ctx, &ec2.ReplaceRouteInput{RouteTableId: awssdk.String(s.RouteTableID),
			DestinationCidrBlock: awssdk.String(spec.Subnet), InstanceId: awssdk.String(id)})
	}
	return classify("route the machine's /24", err)
}

// unrouteSubnet deletes the routes to an instance of a routed cluster
// from its route table (found by its tag): a route to another instance,
// which took the /24 since, stays.
func (p *Provider) unrouteSubnet(ctx context.Context, id string) error {
	out, err := p.client.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if errors.Is(classify("describe", err), provisioner.ErrNotFound) {
		return nil
	}
	if err != nil {
		return classify("describe", err)
	}
	table := ""
	for _, r := range out.Reservations {
		for _, i := range r.Instances {
			for _, t := range i.Tags {
				if awssdk.ToString(t.Key) == provisioner.TagRouteTable {
					table = awssdk.ToString(t.Value)
				}
			}
		}
	}
	if table == "" {
		return nil
	}
	tables, err := p.client.DescribeRouteTables(ctx, &ec2.DescribeRouteTablesInput{RouteTableIds: []string{table}})
	if err != nil {
		return classify("describe the route table", err)
	}
	for _, t := range tables.RouteTables {
		for _, r := range t.Routes {
			if awssdk.ToString(r.InstanceId) != id || r.DestinationCidrBlock == nil {
				continue
			}
			_, err := p.client.DeleteRoute(ctx, &ec2.DeleteRouteInput{RouteTableId: awssdk.String(table), DestinationCidrBlock: r.DestinationCidrBlock})
			if err != nil && apiCode(err) != "InvalidRoute.NotFound" {
				return classify("delete the machine's route", err)
			}
		}
	}
	return nil
}
