package azure

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/provisioner/cloudinit"
)

// Settings are a cluster's spec.provider.config for azure.
type Settings struct {
	SubscriptionID string
	ResourceGroup  string
	// Image is "publisher:offer:sku:version" or an image resource id.
	Image         string
	SubnetID      string
	AdminUsername string
	SSHPublicKey  string
	// RouteTable is the route table, in ResourceGroup, of the machines'
	// subnet: it gets a user-defined route for each machine's /24
	// (network mode routed).
	RouteTable string
	Agent      cloudinit.Agent
}

var settingKeys = append([]string{"subscriptionId", "resourceGroup", "image", "subnetId", "adminUsername", "sshPublicKey", "routeTable"}, cloudinit.AgentConfigKeys...)

// ParseSettings reads spec.provider.config, naming the bad key.
func ParseSettings(cfg map[string]string) (Settings, error) {
	keys := make([]string, 0, len(cfg))
	for k := range cfg {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	known := strings.Join(settingKeys, ", ")
	for _, k := range keys {
		if !strings.Contains(", "+known+", ", ", "+k+", ") {
			return Settings{}, fmt.Errorf("spec.provider.config.%s: unknown setting for azure (known: %s)", k, known)
		}
	}
	s := Settings{SubscriptionID: cfg["subscriptionId"], ResourceGroup: cfg["resourceGroup"], Image: cfg["image"], SubnetID: cfg["subnetId"],
		AdminUsername: cfg["adminUsername"], SSHPublicKey: cfg["sshPublicKey"], RouteTable: cfg["routeTable"]}
	if s.AdminUsername == "" {
		s.AdminUsername = "gantry"
	}
	for _, req := range []struct{ key, value string }{{"subscriptionId", s.SubscriptionID}, {"resourceGroup", s.ResourceGroup},
		{"image", s.Image}, {"subnetId", s.SubnetID}, {"sshPublicKey", s.SSHPublicKey}} {
		if req.value == "" {
			return s, fmt.Errorf("spec.provider.config.%s: required for azure", req.key)
		}
	}
	if !strings.HasPrefix(s.Image, "/") && strings.Count(s.Image, ":") != 3 {
		return s, fmt.Errorf("spec.provider.config.image: want publisher:offer:sku:version or an image resource id, got %q", s.Image)
	}
	agent, err := cloudinit.AgentFromConfig(cfg)
	s.Agent = agent
	return s, err
}

// SpotRatio estimates spot prices from pay-as-you-go ones.
const SpotRatio = 0.25

// Catalog is a small built-in catalog of common VM sizes with their eastus
// pay-as-you-go Linux prices; zones are the location's 1, 2 and 3.
func Catalog(location string) []provisioner.InstanceType {
	type row struct {
		name      string
		vcpu, gib int64
		price     float64
		gpu       *provisioner.GPU
	}
	rows := []row{
		{"Standard_B2s", 2, 4, 0.0416, nil}, {"Standard_D2s_v5", 2, 8, 0.096, nil}, {"Standard_D4s_v5", 4, 16, 0.192, nil},
		{"Standard_D8s_v5", 8, 32, 0.384, nil}, {"Standard_F4s_v2", 4, 8, 0.169, nil}, {"Standard_E4s_v5", 4, 32, 0.252, nil},
		{"Standard_NC4as_T4_v3", 4, 28, 0.526, &provisioner.GPU{Type: "nvidia-tesla-t4", Count: 1, VRAMGB: 16}},
		{"Standard_NC24ads_A100_v4", 24, 220, 3.673, &provisioner.GPU{Type: "nvidia-a100-pcie-80gb", Count: 1, VRAMGB: 80}},
	}
	out := make([]provisioner.InstanceType, 0, len(rows))
	for _, r := range rows {
		it := provisioner.InstanceType{Name: r.name, MilliCPU: r.vcpu * 1000, MemoryBytes: r.gib << 30}
		if r.gpu != nil {
			it.GPUs = []provisioner.GPU{*r.gpu}
		}
		for _, z := range []string{"1", "2", "3"} {
			zone := location + "-" + z
			it.Offerings = append(it.Offerings,
				provisioner.Offering{Zone: zone, CapacityType: "onDemand", PricePerHour: r.price},
				provisioner.Offering{Zone: zone, CapacityType: "spot", PricePerHour: float64(int64(r.price*SpotRatio*10000+0.5)) / 10000})
		}
		out = append(out, it)
	}
	return out
}
