package aws

import (
	"context"
	"errors"
	"fmt"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/provisioner"
)

// tagMesh marks the security groups the provider makes for overlays.
const tagMesh = "gantry.dev/mesh"

var _ provisioner.MeshFirewaller = (*Provider)(nil)

// meshGroup is the security group that opens the overlay's WireGuard port
// between an overlay cluster's machines: the cluster's own
// (meshSecurityGroupId), or one the provider makes in the VPC of the
// machine's subnet, named after the installation and the cluster, that
// lets its members reach each other on UDP MeshPort. "" for a cluster not
// in overlay mode.
func (p *Provider) meshGroup(ctx context.Context, spec provisioner.LaunchSpec, s Settings) (string, error) {
	if spec.Bootstrap.NetworkMode != api.NetworkOverlay {
		return "", nil
	}
	if s.MeshSecurityGroupID != "" {
		return s.MeshSecurityGroupID, nil
	}
	vpc, err := p.vpcOf(ctx, s.Subnets[spec.Zone])
	if err != nil {
		return "", err
	}
	installation, cluster := spec.Tags[provisioner.TagInstallation], spec.Bootstrap.Cluster
	name := meshGroupName(installation, cluster)
	if id, err := p.findGroup(ctx, name, vpc); err != nil || id != "" {
		return id, err
	}
	tags := []types.Tag{
		{Key: awssdk.String(provisioner.TagManagedBy), Value: awssdk.String(provisioner.ManagedByValue)},
		{Key: awssdk.String(provisioner.TagInstallation), Value: awssdk.String(installation)},
		{Key: awssdk.String(provisioner.TagCluster), Value: awssdk.String(cluster)},
		{Key: awssdk.String(tagMesh), Value: awssdk.String("wireguard")},
	}
	in := &ec2.CreateSecurityGroupInput{GroupName: awssdk.String(name), Description: awssdk.String("Gantry overlay of cluster " + cluster + ": WireGuard between its machines"),
		TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeSecurityGroup, Tags: tags}}}
	if vpc != "" {
		in.VpcId = awssdk.String(vpc)
	}
	out, err := p.client.CreateSecurityGroup(ctx, in)
	if apiCode(err) == "InvalidGroup.Duplicate" { // another launch made it meanwhile
		return p.findGroup(ctx, name, vpc)
	}
	if err != nil {
		return "", classify("create the overlay's security group", err)
	}
	id := awssdk.ToString(out.GroupId)
	_, err = p.client.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{GroupId: out.GroupId, IpPermissions: []types.IpPermission{{
		IpProtocol: awssdk.String("udp"), FromPort: awssdk.Int32(provisioner.MeshPort), ToPort: awssdk.Int32(provisioner.MeshPort),
		UserIdGroupPairs: []types.UserIdGroupPair{{GroupId: out.GroupId, Description: awssdk.String("the cluster's machines")}},
	}}})
	if err != nil && apiCode(err) != "InvalidPermission.Duplicate" {
		return "", classify("open WireGuard's port in the overlay's security group", err)
	}
	return id, nil
}

// meshGroupName is unique per installation and cluster (and under EC2's
// 255 characters: cluster names are DNS labels).
func meshGroupName(installation, cluster string) string {
	return "gantry-mesh-" + installation + "-" + cluster
}

// vpcOf is the VPC of a subnet ("" for none: the default VPC).
func (p *Provider) vpcOf(ctx context.Context, subnet string) (string, error) {
	if subnet == "" {
		return "", nil
	}
	out, err := p.client.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{subnet}})
	if err != nil {
		return "", classify("find the VPC of "+subnet, err)
	}
	if len(out.Subnets) != 1 {
		return "", provisioner.Errorf(provisioner.KindInvalid, "launch", "subnet %s: not found", subnet)
	}
	return awssdk.ToString(out.Subnets[0].VpcId), nil
}

func (p *Provider) findGroup(ctx context.Context, name, vpc string) (string, error) {
	filters := []types.Filter{{Name: awssdk.String("group-name"), Values: []string{name}}}
	if vpc != "" {
		filters = append(filters, types.Filter{Name: awssdk.String("vpc-id"), Values: []string{vpc}})
	}
	out, err := p.client.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: filters})
	if err != nil {
		return "", classify("find the overlay's security group", err)
	}
	if len(out.SecurityGroups) == 0 {
		return "", nil
	}
	return awssdk.ToString(out.SecurityGroups[0].GroupId), nil
}

// SweepMeshFirewalls implements provisioner.MeshFirewaller: it deletes the
// overlay security groups it made for this installation's clusters not in
// keep. A group an instance still holds (EC2 says DependencyViolation until
// the instance is terminated) waits for the next sweep.
func (p *Provider) SweepMeshFirewalls(ctx context.Context, installation string, keep map[string]bool) error {
	out, err := p.client.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: []types.Filter{
		{Name: awssdk.String("tag:" + provisioner.TagManagedBy), Values: []string{provisioner.ManagedByValue}},
		{Name: awssdk.String("tag:" + provisioner.TagInstallation), Values: []string{installation}},
		{Name: awssdk.String("tag:" + tagMesh), Values: []string{"wireguard"}},
	}})
	if err != nil {
		return classify("list the overlays' security groups", err)
	}
	var errs []error
	for _, g := range out.SecurityGroups {
		cluster := ""
		for _, t := range g.Tags {
			if awssdk.ToString(t.Key) == provisioner.TagCluster {
				cluster = awssdk.ToString(t.Value)
			}
		}
		if cluster == "" || keep[cluster] {
			continue
		}
		_, err := p.client.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: g.GroupId})
		if err != nil && apiCode(err) != "DependencyViolation" && apiCode(err) != "InvalidGroup.NotFound" {
			errs = append(errs, fmt.Errorf("delete %s: %w", awssdk.ToString(g.GroupId), err))
		}
	}
	return errors.Join(errs...)
}
