package gcp

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/provisioner/cloudinit"
)

// Settings are a cluster's spec.provider.config for gcp.
type Settings struct {
	Project        string
	Image          string
	Network        string
	Subnetwork     string
	ServiceAccount string
	// MeshNetworkTag is a network tag the user's own firewall rule opens
	// UDP 51820 between; without it the provider makes a rule (overlay
	// clusters only).
	MeshNetworkTag string
	DiskSizeGB     int64
	Agent          cloudinit.Agent
}

var settingKeys = append([]string{"project", "image", "network", "subnetwork", "serviceAccount", "meshNetworkTag", "diskSizeGb"}, cloudinit.AgentConfigKeys...)

// ParseSettings reads spec.provider.config, naming the bad key.
func ParseSettings(cfg map[string]string) (Settings, error) {
	if err := knownKeys(cfg, settingKeys, "gcp"); err != nil {
		return Settings{}, err
	}
	s := Settings{Project: cfg["project"], Image: cfg["image"], Network: cfg["network"], Subnetwork: cfg["subnetwork"], ServiceAccount: cfg["serviceAccount"], MeshNetworkTag: cfg["meshNetworkTag"], DiskSizeGB: 20}
	if s.Project == "" {
		return s, fmt.Errorf("spec.provider.config.project: required for gcp")
	}
	if s.Image == "" {
		return s, fmt.Errorf("spec.provider.config.image: required (a source image such as projects/debian-cloud/global/images/family/debian-12)")
	}
	if v := cfg["diskSizeGb"]; v != "" {
		if _, err := fmt.Sscan(v, &s.DiskSizeGB); err != nil || s.DiskSizeGB < 10 {
			return s, fmt.Errorf("spec.provider.config.diskSizeGb: want a number of GB ≥ 10, got %q", v)
		}
	}
	if s.Network == "" && s.Subnetwork == "" {
		s.Network = "global/networks/default"
	}
	agent, err := cloudinit.AgentFromConfig(cfg)
	s.Agent = agent
	return s, err
}

func knownKeys(cfg map[string]string, known []string, provider string) error {
	set := map[string]bool{}
	for _, k := range known {
		set[k] = true
	}
	keys := make([]string, 0, len(cfg))
	for k := range cfg {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !set[k] {
			return fmt.Errorf("spec.provider.config.%s: unknown setting for %s (known: %s)", k, provider, strings.Join(known, ", "))
		}
	}
	return nil
}

// Catalog is a small built-in catalog of common machine types with their
// us-central1 on-demand prices; spot is estimated at SpotRatio of it.
func Catalog(zones []string) []provisioner.InstanceType {
	type row struct {
		name      string
		vcpu, gib int64
		price     float64
		gpu       *provisioner.GPU
	}
	rows := []row{
		{"e2-standard-2", 2, 8, 0.0670, nil}, {"e2-standard-4", 4, 16, 0.1340, nil}, {"e2-standard-8", 8, 32, 0.2681, nil},
		{"e2-highcpu-4", 4, 4, 0.0989, nil}, {"e2-highmem-4", 4, 32, 0.1807, nil},
		{"n2-standard-2", 2, 8, 0.0971, nil}, {"n2-standard-4", 4, 16, 0.1942, nil}, {"n2-standard-8", 8, 32, 0.3885, nil},
		{"c3-standard-4", 4, 16, 0.2014, nil}, {"c3-standard-8", 8, 32, 0.4028, nil},
		{"g2-standard-4", 4, 16, 0.7068, &provisioner.GPU{Type: "nvidia-l4", Count: 1, VRAMGB: 22.5}},
		{"a2-highgpu-1g", 12, 85, 3.6731, &provisioner.GPU{Type: "nvidia-a100-sxm4-40gb", Count: 1, VRAMGB: 40}},
	}
	out := make([]provisioner.InstanceType, 0, len(rows))
	for _, r := range rows {
		it := provisioner.InstanceType{Name: r.name, MilliCPU: r.vcpu * 1000, MemoryBytes: r.gib << 30}
		if r.gpu != nil {
			it.GPUs = []provisioner.GPU{*r.gpu}
		}
		for _, z := range zones {
			it.Offerings = append(it.Offerings,
				provisioner.Offering{Zone: z, CapacityType: "onDemand", PricePerHour: r.price},
				provisioner.Offering{Zone: z, CapacityType: "spot", PricePerHour: float64(int64(r.price*SpotRatio*10000+0.5)) / 10000})
		}
		out = append(out, it)
	}
	return out
}

// SpotRatio estimates spot prices from on-demand ones.
const SpotRatio = 0.3

// CatalogFor is the catalog in region's zones -a, -b, -c (us-central1 when
// region is empty), for planning and validation.
func CatalogFor(region string) []provisioner.InstanceType {
	if region == "" {
		region = "us-central1"
	}
	return Catalog([]string{region + "-a", region + "-b", region + "-c"})
}
