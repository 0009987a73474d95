package aws_test

import (
	"context"
	"slices"
	"testing"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/provider/aws/ec2fake"
	"github.com/gantry-dev/gantry/provisioner"
)

func overlayLaunch(key, cluster, machine string) provisioner.LaunchSpec {
	s := launchSpec(key)
	s.Bootstrap.NetworkMode, s.Bootstrap.Cluster, s.Bootstrap.MachineID = api.NetworkOverlay, cluster, machine
	s.Tags[provisioner.TagInstallation], s.Tags[provisioner.TagCluster], s.Tags[provisioner.TagMachine] = "inst1", cluster, machine
	return s
}

// An overlay cluster's machines get a security group the provider makes
// once, in the VPC of their subnet, that opens WireGuard's UDP port to its
// own members only; a host cluster's get none. The sweep keeps the group
// while the cluster lives, leaves it while an instance still holds it, and
// deletes it once the cluster is gone and its instances terminated.
func TestOverlayMachinesShareAMeshSecurityGroup(t *testing.T) {
	fake, url := newFake(t)
	fake.AddSubnet("subnet-bbb", "vpc-prod", "us-east-1b")
	p := newProvider(t, url)
	ctx := context.Background()
	var ids []string
	for _, key := range []string{"lk-1", "lk-2"} {
		inst, err := p.Launch(ctx, overlayLaunch(key, "prod", "prod-general-"+key))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, inst.ID)
	}
	groups := fake.Groups()
	if len(groups) != 1 {
		t.Fatalf("%d security groups, want the one overlay group: %+v", len(groups), groups)
	}
	g := groups[0]
	if g.VPC != "vpc-prod" || g.Name != "gantry-mesh-inst1-prod" || g.Tags[provisioner.TagCluster] != "prod" || g.Tags[provisioner.TagInstallation] != "inst1" {
		t.Errorf("group %+v: want it in the subnet's VPC, named and tagged for the installation's cluster", g)
	}
	want := ec2fake.Rule{Protocol: "udp", FromPort: provisioner.MeshPort, ToPort: provisioner.MeshPort, Groups: []string{g.ID}}
	if len(g.Rules) != 1 || g.Rules[0].Protocol != want.Protocol || g.Rules[0].FromPort != want.FromPort || g.Rules[0].ToPort != want.ToPort || !slices.Equal(g.Rules[0].Groups, want.Groups) {
		t.Errorf("rules %+v, want only %+v (the group's own members)", g.Rules, want)
	}
	for _, id := range ids {
		inst, _ := fake.Instance(id)
		if !slices.Equal(inst.SecurityGroups, []string{"sg-1", "sg-2", g.ID}) {
			t.Errorf("%s has groups %v, want the cluster's own and the overlay's", id, inst.SecurityGroups)
		}
	}
	host, err := p.Launch(ctx, launchSpec("lk-host"))
	if err != nil {
		t.Fatal(err)
	}
	if inst, _ := fake.Instance(host.ID); slices.Contains(inst.SecurityGroups, g.ID) {
		t.Errorf("a host-mode machine got the overlay's group: %v", inst.SecurityGroups)
	}

	if err := p.SweepMeshFirewalls(ctx, "inst1", map[string]bool{"prod": true}); err != nil || len(fake.Groups()) != 1 {
		t.Fatalf("sweep with the cluster alive: %v, %d groups left", err, len(fake.Groups()))
	}
	if err := p.SweepMeshFirewalls(ctx, "other-installation", nil); err != nil || len(fake.Groups()) != 1 {
		t.Fatalf("another installation's sweep: %v, %d groups left", err, len(fake.Groups()))
	}
	if err := p.SweepMeshFirewalls(ctx, "inst1", nil); err != nil || len(fake.Groups()) != 1 {
		t.Fatalf("sweep while instances hold the group: %v, %d groups left (want it kept for the next sweep)", err, len(fake.Groups()))
	}
	for _, id := range ids {
		if err := p.Terminate(ctx, id); err != nil {
			t.Fatal(err)
		}
		for st := ""; st != "terminated"; {
			inst, _ := p.Describe(ctx, id)
			st = string(inst.State)
		}
	}
	if err := p.SweepMeshFirewalls(ctx, "inst1", nil); err != nil || len(fake.Groups()) != 0 {
		t.Fatalf("sweep after the cluster's instances terminated: %v, %d groups left", err, len(fake.Groups()))
	}
}

// A cluster that names its own mesh group (meshSecurityGroupId) gets it
// on its machines, and nothing is made.
func TestANamedMeshSecurityGroupIsUsedAsItIs(t *testing.T) {
	fake, url := newFake(t)
	p := newProvider(t, url)
	spec := overlayLaunch("lk-1", "prod", "prod-general-1")
	spec.Config = map[string]string{"imageId": "ami-0123456789abcdef0", "meshSecurityGroupId": "sg-mine"}
	inst, err := p.Launch(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := fake.Instance(inst.ID)
	if !slices.Equal(got.SecurityGroups, []string{"sg-mine"}) || len(fake.Groups()) != 0 || fake.Calls("CreateSecurityGroup") != 0 {
		t.Fatalf("groups %v, %d made: want the named one only", got.SecurityGroups, len(fake.Groups()))
	}
}
