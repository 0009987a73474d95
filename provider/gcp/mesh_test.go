package gcp_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/provisioner"
)

func overlayLaunch(key, cluster string) provisioner.LaunchSpec {
	s := launchSpec(key)
	s.Bootstrap.NetworkMode, s.Bootstrap.Cluster = api.NetworkOverlay, cluster
	s.Tags[provisioner.TagInstallation], s.Tags[provisioner.TagCluster] = "inst1", cluster
	return s
}

// An overlay cluster's machines carry one network tag, and one firewall
// rule on their subnetwork's network lets machines with that tag reach
// each other on UDP 51820; a host cluster's carry none. The sweep keeps the
// rule while the cluster lives and deletes it once it is gone.
func TestOverlayMachinesShareAMeshFirewallRule(t *testing.T) {
	fake, url := newFake(t)
	fake.AddSubnetwork("us-central1", "nodes", "projects/gantry-test/global/networks/prod")
	p := newProvider(t, url)
	ctx := context.Background()
	var tags [][]string
	for _, key := range []string{"lk-1", "lk-2"} {
		spec := overlayLaunch(key, "prod")
		spec.Config = map[string]string{"project": "gantry-test", "image": settings["image"], "subnetwork": "regions/us-central1/subnetworks/nodes"}
		inst, err := p.Launch(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := fake.Instance(inst.ID)
		tags = append(tags, got.GetTags().GetItems())
	}
	rules := fake.Firewalls()
	if len(rules) != 1 {
		t.Fatalf("%d firewall rules, want the overlay's one", len(rules))
	}
	r := rules[0]
	tag := r.GetName()
	if !strings.HasPrefix(tag, "gantry-mesh-") || r.GetNetwork() != "projects/gantry-test/global/networks/prod" || r.GetDirection() != "INGRESS" ||
		!slices.Equal(r.GetSourceTags(), []string{tag}) || !slices.Equal(r.GetTargetTags(), []string{tag}) {
		t.Errorf("rule %v: want ingress on the subnetwork's network, from and to the cluster's tag", r)
	}
	if a := r.GetAllowed(); len(a) != 1 || a[0].GetIPProtocol() != "udp" || !slices.Equal(a[0].GetPorts(), []string{"51820"}) {
		t.Errorf("allowed %v, want udp 51820 only", a)
	}
	for _, have := range tags {
		if !slices.Equal(have, []string{tag}) {
			t.Errorf("machine network tags %v, want [%s]", have, tag)
		}
	}
	host, err := p.Launch(ctx, launchSpec("lk-host"))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := fake.Instance(host.ID); len(got.GetTags().GetItems()) != 0 {
		t.Errorf("a host-mode machine got network tags %v", got.GetTags().GetItems())
	}
	if err := p.SweepMeshFirewalls(ctx, "inst1", map[string]bool{"prod": true}); err != nil || len(fake.Firewalls()) != 1 {
		t.Fatalf("sweep with the cluster alive: %v, %d rules left", err, len(fake.Firewalls()))
	}
	if err := p.SweepMeshFirewalls(ctx, "another", nil); err != nil || len(fake.Firewalls()) != 1 {
		t.Fatalf("another installation's sweep: %v, %d rules left", err, len(fake.Firewalls()))
	}
	if err := p.SweepMeshFirewalls(ctx, "inst1", nil); err != nil || len(fake.Firewalls()) != 0 {
		t.Fatalf("sweep once the cluster is gone: %v, %d rules left", err, len(fake.Firewalls()))
	}
	// A later overlay launch of the same cluster makes the rule again.
	if _, err := p.Launch(ctx, overlayLaunch("lk-3", "prod")); err != nil || len(fake.Firewalls()) != 1 {
		t.Fatalf("launch after the sweep: %v, %d rules", err, len(fake.Firewalls()))
	}
}

// A cluster that names its own network tag (meshNetworkTag) gets it on its
// machines, and no rule is made.
func TestANamedMeshNetworkTagIsUsedAsItIs(t *testing.T) {
	fake, url := newFake(t)
	p := newProvider(t, url)
	spec := overlayLaunch("lk-1", "prod")
	spec.Config = map[string]string{"project": "gantry-test", "image": settings["image"], "meshNetworkTag": "wireguard-nodes"}
	inst, err := p.Launch(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := fake.Instance(inst.ID)
	if !slices.Equal(got.GetTags().GetItems(), []string{"wireguard-nodes"}) || len(fake.Firewalls()) != 0 {
		t.Fatalf("tags %v, %d rules made: want the named tag only", got.GetTags().GetItems(), len(fake.Firewalls()))
	}
}
