package docker

import "github.com/gantry-dev/gantry/provisioner"

// Zone is the one zone of this engine.
const Zone = "docker-a"

// Catalog is the built-in set of instance types. Each machine container
// gets its type's CPU and memory as engine limits.
func Catalog() []provisioner.InstanceType {
	mk := func(name string, milliCPU, memMi, diskGi int64, price float64) provisioner.InstanceType {
		return provisioner.InstanceType{
			Name: name, MilliCPU: milliCPU, MemoryBytes: memMi << 20, EphemeralBytes: diskGi << 30,
			Offerings: []provisioner.Offering{
				{Zone: Zone, CapacityType: "onDemand", PricePerHour: price},
				{Zone: Zone, CapacityType: "spot", PricePerHour: price * 0.4},
			},
		}
	}
	return []provisioner.InstanceType{
		mk("docker.small", 500, 512, 5, 0.005),
		mk("docker.medium", 1000, 1024, 10, 0.01),
		mk("docker.large", 2000, 4096, 20, 0.02),
	}
}
