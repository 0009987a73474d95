// Package awscatalog is the built-in EC2 catalog: instance types and their
// on-demand prices, embedded from catalog.json. It is apart from
// provider/aws so that what plans with it (the planner's tests, `gantry
// plan --offline`) does not compile the EC2 SDK.
package awscatalog

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/gantry-dev/gantry/provisioner"
)

// CatalogEntry is one instance type of the built-in catalog (catalog.json,
// made by `go run ./provider/aws/gencatalog` from catalogdata/).
type CatalogEntry struct {
	Name        string            `json:"name"`
	MilliCPU    int64             `json:"milliCpu"`
	MemoryBytes int64             `json:"memoryBytes"`
	GPUs        []provisioner.GPU `json:"gpus,omitempty"`
	// OnDemand is the hourly list price in PriceRegion.
	OnDemand float64 `json:"onDemandPerHour"`
}

// CatalogFile is catalog.json.
type CatalogFile struct {
	PriceRegion string         `json:"priceRegion"`
	Types       []CatalogEntry `json:"types"`
}

//go:embed catalog.json
var catalogJSON []byte

// Builtin is the embedded catalog.
func Builtin() (CatalogFile, error) {
	var f CatalogFile
	if err := json.Unmarshal(catalogJSON, &f); err != nil {
		return f, fmt.Errorf("aws catalog.json: %w", err)
	}
	return f, nil
}

// SpotRatio estimates spot prices from on-demand ones when no spot price
// is known (the catalog ships none; spot prices move hourly).
const SpotRatio = 0.35

// Catalog turns the catalog into instance types with an offering per zone
// of the region, on demand and (estimated) spot. zones defaults to the
// region's a, b and c.
func (f CatalogFile) Catalog(region string, zones []string) []provisioner.InstanceType {
	if len(zones) == 0 {
		zones = []string{region + "a", region + "b", region + "c"}
	}
	out := make([]provisioner.InstanceType, 0, len(f.Types))
	for _, e := range f.Types {
		it := provisioner.InstanceType{Name: e.Name, MilliCPU: e.MilliCPU, MemoryBytes: e.MemoryBytes, GPUs: e.GPUs}
		for _, z := range zones {
			it.Offerings = append(it.Offerings,
				provisioner.Offering{Zone: z, CapacityType: "onDemand", PricePerHour: e.OnDemand},
				provisioner.Offering{Zone: z, CapacityType: "spot", PricePerHour: round(e.OnDemand * SpotRatio)})
		}
		out = append(out, it)
	}
	return out
}

func round(x float64) float64 { return float64(int64(x*10000+0.5)) / 10000 }

// DescribedTypes is the output of `aws ec2 describe-instance-types
// --output json` (the fields the catalog uses).
type DescribedTypes struct {
	InstanceTypes []struct {
		InstanceType string
		VCpuInfo     struct{ DefaultVCpus int64 }
		MemoryInfo   struct{ SizeInMiB int64 }
		GpuInfo      *struct {
			Gpus []struct {
				Name, Manufacturer string
				Count              int
				MemoryInfo         struct{ SizeInMiB int64 }
			}
		}
	}
}

// Prices are on-demand hourly prices by type for one region.
type Prices struct {
	Region   string             `json:"region"`
	OnDemand map[string]float64 `json:"onDemandPerHour"`
}

// gpuNames maps EC2's GPU names to what nvidia-smi reports on the machine
// (and so what the agent reports), so catalog and machines agree.
var gpuNames = map[string]string{
	"T4": "nvidia-tesla-t4", "A10G": "nvidia-a10g", "L4": "nvidia-l4", "V100": "nvidia-tesla-v100-sxm2-16gb",
	"A100": "nvidia-a100-sxm4-40gb", "H100": "nvidia-h100-80gb-hbm3", "K80": "nvidia-tesla-k80", "M60": "nvidia-tesla-m60",
}

// BuildCatalog joins described types and prices; a type without a price
// is left out (it could not be planned for).
func BuildCatalog(types DescribedTypes, prices Prices) (CatalogFile, []string) {
	out := CatalogFile{PriceRegion: prices.Region}
	var skipped []string
	for _, t := range types.InstanceTypes {
		price, ok := prices.OnDemand[t.InstanceType]
		if !ok {
			skipped = append(skipped, t.InstanceType)
			continue
		}
		e := CatalogEntry{Name: t.InstanceType, MilliCPU: t.VCpuInfo.DefaultVCpus * 1000, MemoryBytes: t.MemoryInfo.SizeInMiB << 20, OnDemand: price}
		if t.GpuInfo != nil {
			for _, g := range t.GpuInfo.Gpus {
				name, ok := gpuNames[g.Name]
				if !ok {
					name = strings.ToLower(g.Manufacturer + "-" + strings.ReplaceAll(g.Name, " ", "-"))
				}
				e.GPUs = append(e.GPUs, provisioner.GPU{Type: name, Count: g.Count, VRAMGB: float64(g.MemoryInfo.SizeInMiB) / 1024})
			}
		}
		out.Types = append(out.Types, e)
	}
	sort.Slice(out.Types, func(i, j int) bool { return out.Types[i].Name < out.Types[j].Name })
	return out, skipped
}

// CatalogFor is the built-in catalog with offerings in region's zones
// (us-east-1 when region is empty), for planning and validation.
func CatalogFor(region string) ([]provisioner.InstanceType, bool) {
	f, err := Builtin()
	if err != nil {
		return nil, false
	}
	if region == "" {
		region = f.PriceRegion
	}
	return f.Catalog(region, nil), true
}
