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
	InstanceProfile  string
	Agent            cloudinit.Agent
}

// settingKeys are the known keys of spec.provider.config.
var settingKeys = []string{"imageId", "launchTemplate", "launchTemplateVersion", "subnets", "securityGroupIds", "instanceProfile",
	"agentUrl.amd64", "agentSha256.amd64", "agentUrl.arm64", "agentSha256.arm64", "agentRuntime"}

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
		SecurityGroupIDs: list(cfg["securityGroupIds"]), InstanceProfile: cfg["instanceProfile"], Subnets: map[string]string{}}
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
	s.Agent = cloudinit.Agent{Binaries: map[string]cloudinit.Binary{}, Runtime: cfg["agentRuntime"]}
	for _, arch := range []string{"amd64", "arm64"} {
		url, sum := cfg["agentUrl."+arch], cfg["agentSha256."+arch]
		if url != "" || sum != "" {
			s.Agent.Binaries[arch] = cloudinit.Binary{URL: url, SHA256: sum}
		}
	}
	if err := s.Agent.Validate(); err != nil {
		return s, fmt.Errorf("spec.provider.config: %w (agentUrl.amd64/agentSha256.amd64: where machines download the gantry binary)", err)
	}
	return s, nil
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
