package local

import "github.com/gantry-dev/gantry/provisioner"

// Zone is the one zone of this host.
const Zone = "local-a"

// Catalog is the built-in set of local instance types. Each machine is an
// agent process that advertises these resources; nothing enforces them.
func Catalog() []provisioner.InstanceType {
	mk := func(name string, cpus, memGi, diskGi int64, price float64) provisioner.InstanceType {
		return provisioner.InstanceType{
			Name: name, MilliCPU: cpus * 1000, MemoryBytes: memGi << 30, EphemeralBytes: diskGi << 30,
			Offerings: []provisioner.Offering{
				{Zone: Zone, CapacityType: "onDemand", PricePerHour: price},
				{Zone: Zone, CapacityType: "spot", PricePerHour: price * 0.4},
			},
		}
	}
	return []provisioner.InstanceType{
		mk("local.small", 1, 1, 10, 0.01),
		mk("local.medium", 2, 2, 20, 0.02),
		mk("local.large", 4, 8, 40, 0.04),
		mk("local.xlarge", 8, 16, 80, 0.08),
	}
}
