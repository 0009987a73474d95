package aws

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gantry-dev/gantry/provisioner/cloudinit"
)

// Settings are a cluster's spec.provider.config for aws.
type Settings struct {
	ImageID               string
	LaunchTemplate        string
	LaunchTemplateVersion string
	// Subnets by zone: the zone's machines launch in that subnet.
	Subnets          map[string]string
	SecurityGroupIDs []string
	// MeshSecurityGroupID is a group of the user's that opens the overlay's
	// WireGuard port between the cluster's machines; without it the
	// provider makes one (overlay clusters only).
	MeshSecurityGroupID string
	InstanceProfile     string
	// RouteTableID is the route table of the machines' subnets, which
	// gets a route for each machine's /24 (network mode routed).
	RouteTableID string
	Agent        cloudinit.Agent
}

// settingKeys are the known keys of spec.provider.config.
var settingKeys = append([]string{"imageId", "launchTemplate", "launchTemplateVersion", "subnets", "securityGroupIds", "meshSecurityGroupId", "instanceProfile", "routeTableId"},
	cloudinit.AgentConfigKeys...)

// ParseSettings reads spec.provider.config, naming the bad key.
func ParseSettings(cfg map[string]string) (Settings, error) {
	known := map[string]bool{}
	for _, k := range settingKeys {
		known[k] = true
	}
	keys := make([]string, 0, len(cfg))
	for k := range cfg {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !known[k] {
			return Settings{}, fmt.Errorf("spec.provider.config.%s: unknown setting for aws (known: %s)", k, strings.Join(settingKeys, ", "))
		}
	}
	s := Settings{ImageID: cfg["imageId"], LaunchTemplate: cfg["launchTemplate"], LaunchTemplateVersion: cfg["launchTemplateVersion"],
		SecurityGroupIDs: list(cfg["securityGroupIds"]), MeshSecurityGroupID: cfg["meshSecurityGroupId"], InstanceProfile: cfg["instanceProfile"], RouteTableID: cfg["routeTableId"], Subnets: map[string]string{}}
	if s.ImageID == "" && s.LaunchTemplate == "" {
		return s, fmt.Errorf("spec.provider.config.imageId: required (or launchTemplate)")
	}
	for _, pair := range list(cfg["subnets"]) {
		zone, subnet, ok := strings.Cut(pair, "=")
		if !ok || zone == "" || !strings.HasPrefix(subnet, "subnet-") {
			return s, fmt.Errorf("spec.provider.config.subnets: want zone=subnet-id pairs, got %q", pair)
		}
		s.Subnets[zone] = subnet
	}
	if s.RouteTableID != "" && !strings.HasPrefix(s.RouteTableID, "rtb-") {
		return s, fmt.Errorf("spec.provider.config.routeTableId: want a route table id (rtb-…), got %q", s.RouteTableID)
	}
	agent, err := cloudinit.AgentFromConfig(cfg)
	s.Agent = agent
	return s, err
}

func list(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}
