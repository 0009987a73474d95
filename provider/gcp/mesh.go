package gcp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/provisioner"
	"google.golang.org/api/iterator"
	"google.golang.org/protobuf/proto"
)

var _ provisioner.MeshFirewaller = (*Provider)(nil)

// meshPrefix starts the names of the firewall rules (and network tags) the
// provider makes for overlays.
const meshPrefix = "gantry-mesh-"

// meshTag is the network tag of an overlay cluster's machines, and the
// name of the firewall rule that lets them reach each other on UDP
// MeshPort: unique per installation and cluster, within GCE's 63
// characters.
func meshTag(installation, cluster string) string {
	sum := sha256.Sum256([]byte(installation + "/" + cluster))
	return meshPrefix + hex.EncodeToString(sum[:10])
}

// meshDescription names what the rule is for; the sweep reads it back.
func meshDescription(installation, cluster string) string {
	return provisioner.TagInstallation + "=" + installation + " " + provisioner.TagCluster + "=" + cluster
}

// meshNetworkTag is the network tag an overlay machine gets: the cluster's
// own (meshNetworkTag, which the user's rule opens), or the provider's,
// whose firewall rule it makes on the instance's network at the first
// launch. "" outside overlay mode.
func (p *Provider) meshNetworkTag(ctx context.Context, spec provisioner.LaunchSpec, s Settings) (string, error) {
	if spec.Bootstrap.NetworkMode != api.NetworkOverlay {
		return "", nil
	}
	if s.MeshNetworkTag != "" {
		return s.MeshNetworkTag, nil
	}
	installation, cluster := spec.Tags[provisioner.TagInstallation], spec.Bootstrap.Cluster
	tag := meshTag(installation, cluster)
	p.mu.Lock()
	made := p.meshMade[tag]
	p.mu.Unlock()
	if made {
		return tag, nil
	}
	network, err := p.networkOf(ctx, s)
	if err != nil {
		return "", err
	}
	rule := &computepb.Firewall{Name: proto.String(tag), Network: proto.String(network), Direction: proto.String("INGRESS"),
		Description: proto.String(meshDescription(installation, cluster)),
		Allowed:     []*computepb.Allowed{{IPProtocol: proto.String("udp"), Ports: []string{strconv.Itoa(provisioner.MeshPort)}}},
		SourceTags:  []string{tag}, TargetTags: []string{tag}}
	op, err := p.firewalls.Insert(ctx, &computepb.InsertFirewallRequest{Project: p.cfg.Project, FirewallResource: rule})
	if err == nil {
		err = op.Wait(ctx)
	}
	if err != nil && !isStatus(err, http.StatusConflict) {
		return "", classify("make the overlay's firewall rule", err)
	}
	p.mu.Lock()
	p.meshMade[tag] = true
	p.mu.Unlock()
	return tag, nil
}

// networkOf is the network the cluster's machines are on.
func (p *Provider) networkOf(ctx context.Context, s Settings) (string, error) {
	if s.Subnetwork == "" {
		return s.Network, nil
	}
	// regions/<region>/subnetworks/<name>, possibly under projects/<p>/.
	parts := strings.Split(s.Subnetwork, "/")
	if len(parts) < 4 || parts[len(parts)-2] != "subnetworks" || parts[len(parts)-4] != "regions" {
		return "", provisioner.Errorf(provisioner.KindInvalid, "launch", "subnetwork %q: want regions/<region>/subnetworks/<name>", s.Subnetwork)
	}
	sub, err := p.subnetworks.Get(ctx, &computepb.GetSubnetworkRequest{Project: p.cfg.Project, Region: parts[len(parts)-3], Subnetwork: parts[len(parts)-1]})
	if err != nil {
		return "", classify("find the network of "+s.Subnetwork, err)
	}
	return sub.GetNetwork(), nil
}

// SweepMeshFirewalls implements provisioner.MeshFirewaller: it deletes
// the overlay firewall rules it made for this installation's clusters not
// in keep (a rule holds no instance: it goes at once).
func (p *Provider) SweepMeshFirewalls(ctx context.Context, installation string, keep map[string]bool) error {
	it := p.firewalls.List(ctx, &computepb.ListFirewallsRequest{Project: p.cfg.Project})
	var errs []error
	for {
		rule, err := it.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			return classify("list the overlays' firewall rules", err)
		}
		inst, cluster, ours := parseMeshDescription(rule)
		if !ours || inst != installation || keep[cluster] {
			continue
		}
		op, err := p.firewalls.Delete(ctx, &computepb.DeleteFirewallRequest{Project: p.cfg.Project, Firewall: rule.GetName()})
		if err == nil {
			err = op.Wait(ctx)
		}
		if err != nil && !isStatus(err, http.StatusNotFound) {
			errs = append(errs, fmt.Errorf("delete %s: %w", rule.GetName(), err))
			continue
		}
		p.mu.Lock()
		delete(p.meshMade, rule.GetName())
		p.mu.Unlock()
	}
	return errors.Join(errs...)
}

// parseMeshDescription reads back the installation and cluster of a rule
// the provider made.
func parseMeshDescription(rule *computepb.Firewall) (installation, cluster string, ok bool) {
	if !strings.HasPrefix(rule.GetName(), meshPrefix) {
		return "", "", false
	}
	for _, field := range strings.Fields(rule.GetDescription()) {
		k, v, _ := strings.Cut(field, "=")
		switch k {
		case provisioner.TagInstallation:
			installation = v
		case provisioner.TagCluster:
			cluster = v
		}
	}
	return installation, cluster, meshTag(installation, cluster) == rule.GetName()
}
