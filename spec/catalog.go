package spec

import (
	"fmt"
	"reflect"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/provisioner"
	yaml "go.yaml.in/yaml/v3"
)

// CatalogFile is a user instance-type catalog (JSON or YAML), for pricing
// a spec with any cloud's prices: `gantry plan --catalog`.
type CatalogFile struct {
	InstanceTypes []CatalogType `json:"instanceTypes"`
}

// CatalogType is one instance type, in the units operators write.
type CatalogType struct {
	Name             string                 `json:"name"`
	CPU              string                 `json:"cpu"`
	Memory           string                 `json:"memory"`
	EphemeralStorage string                 `json:"ephemeralStorage,omitempty"`
	GPUs             []provisioner.GPU      `json:"gpus,omitempty"`
	Offerings        []provisioner.Offering `json:"offerings"`
}

// ParseCatalog reads and validates a catalog file; errors name the field.
func ParseCatalog(file string, data []byte) ([]provisioner.InstanceType, error) {
	var tree any
	if err := yaml.Unmarshal(data, &tree); err != nil {
		return nil, ErrorList{{File: file, Message: "not valid YAML or JSON: " + cleanYAMLError(err)}}
	}
	var cf CatalogFile
	var errs ErrorList
	decodeValue("", tree, reflect.ValueOf(&cf).Elem(), &errs)
	if errs != nil {
		return nil, errs.locate(file, 0)
	}
	if len(cf.InstanceTypes) == 0 {
		errs.add("instanceTypes", "at least one instance type is required")
	}
	seen := map[string]bool{}
	var out []provisioner.InstanceType
	for i, ct := range cf.InstanceTypes {
		it, typeErrs := catalogType(indexPath("instanceTypes", i), ct)
		errs = append(errs, typeErrs...)
		if seen[ct.Name] {
			errs.add(indexPath("instanceTypes", i)+".name", "duplicate instance type %q", ct.Name)
		}
		seen[ct.Name] = true
		out = append(out, it)
	}
	return out, errs.locate(file, 0).Err()
}

func catalogType(path string, ct CatalogType) (provisioner.InstanceType, ErrorList) {
	var errs ErrorList
	it := provisioner.InstanceType{Name: ct.Name, GPUs: ct.GPUs, Offerings: ct.Offerings}
	if ct.Name == "" {
		errs.add(path+".name", "required")
	}
	var err error
	if it.MilliCPU, err = api.ParseCPU(ct.CPU); err != nil || it.MilliCPU == 0 {
		errs.add(path+".cpu", "want a positive number of cores, got %q", ct.CPU)
	}
	if it.MemoryBytes, err = api.ParseBytes(ct.Memory); err != nil || it.MemoryBytes == 0 {
		errs.add(path+".memory", "want a positive quantity such as 8Gi, got %q", ct.Memory)
	}
	if ct.EphemeralStorage != "" {
		if it.EphemeralBytes, err = api.ParseBytes(ct.EphemeralStorage); err != nil {
			errs.add(path+".ephemeralStorage", "%v", err)
		}
	}
	for j, g := range ct.GPUs {
		if g.Type == "" || g.Count < 1 || g.VRAMGB < 0 {
			errs.add(fmt.Sprintf("%s.gpus[%d]", path, j), "want type, count ≥ 1 and vramGB ≥ 0")
		}
	}
	if len(ct.Offerings) == 0 {
		errs.add(path+".offerings", "at least one offering (zone, capacityType, pricePerHour) is required")
	}
	for j, o := range ct.Offerings {
		op := fmt.Sprintf("%s.offerings[%d]", path, j)
		if o.CapacityType != api.CapacityOnDemand && o.CapacityType != api.CapacitySpot {
			errs.add(op+".capacityType", "want onDemand or spot, got %q", o.CapacityType)
		}
		if o.PricePerHour < 0 {
			errs.add(op+".pricePerHour", "must be 0 or more")
		}
	}
	return it, errs
}
