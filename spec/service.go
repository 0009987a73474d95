package spec

import (
	"fmt"
	"strings"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/provisioner"
)

// MaxRevisionHistory bounds the old revisions kept per service.
const MaxRevisionHistory = 100

// defaultUpdate writes the update policy's defaults (package api's).
func defaultUpdate(u *api.UpdatePolicy) {
	setDefault := func(p **int, v int) {
		if *p == nil {
			*p = &v
		}
	}
	setDefault(&u.MaxSurge, u.Surge())
	setDefault(&u.MaxUnavailable, u.Unavailable())
	setDefault(&u.RevisionHistory, u.History())
	if u.ProgressDeadlineSeconds == 0 {
		u.ProgressDeadlineSeconds = api.DefaultProgressDeadlineSeconds
	}
	if u.AutoRevert == nil {
		yes := true
		u.AutoRevert = &yes
	}
}

func validateUpdate(u api.UpdatePolicy) ErrorList {
	var errs ErrorList
	surge, unavailable := u.Surge(), u.Unavailable()
	if surge < 0 {
		errs.add("spec.update.maxSurge", "must be 0 or more, got %d", surge)
	}
	if unavailable < 0 {
		errs.add("spec.update.maxUnavailable", "must be 0 or more, got %d", unavailable)
	}
	if surge == 0 && unavailable == 0 {
		errs.add("spec.update.maxUnavailable", "maxSurge and maxUnavailable cannot both be 0: a deployment could never replace a replica")
	}
	if u.MinHealthySeconds < 0 {
		errs.add("spec.update.minHealthySeconds", "must be 0 or more")
	}
	if u.DrainSeconds != nil && *u.DrainSeconds < 0 {
		errs.add("spec.update.drainSeconds", "must be 0 or more, got %d", *u.DrainSeconds)
	}
	if u.ProgressDeadlineSeconds < 0 {
		errs.add("spec.update.progressDeadlineSeconds", "must be 0 or more")
	} else if u.ProgressDeadlineSeconds > 0 && u.ProgressDeadlineSeconds <= u.MinHealthySeconds {
		errs.add("spec.update.progressDeadlineSeconds", "must be greater than minHealthySeconds (%d), or no replica could ever count as available in time", u.MinHealthySeconds)
	}
	if u.Canary < 0 {
		errs.add("spec.update.canary", "must be 0 or more")
	}
	switch {
	case u.CanaryWeight < 0 || u.CanaryWeight > 99:
		errs.add("spec.update.canaryWeight", "must be a percent of requests, between 0 and 99 (promote to send them all), got %d", u.CanaryWeight)
	case u.CanaryWeight > 0 && u.Canary == 0:
		errs.add("spec.update.canaryWeight", "needs canary replicas (spec.update.canary) to send requests to")
	}
	if u.AutoPromote && u.Canary == 0 {
		errs.add("spec.update.autoPromote", "needs canary replicas to promote")
	}
	if h := u.History(); h < 0 || h > MaxRevisionHistory {
		errs.add("spec.update.revisionHistory", "must be between 0 and %d, got %d", MaxRevisionHistory, h)
	}
	return errs
}

// validateRunnable refuses what no runtime can start: NUL bytes in the
// strings a process gets (exec(2) ends a string at NUL).
func validateRunnable(s api.ServiceSpec) ErrorList {
	var errs ErrorList
	checkList := func(path string, list []string) {
		for i, v := range list {
			if strings.ContainsRune(v, 0) {
				errs.add(indexPath(path, i), "contains a NUL byte, which no process can receive")
			}
		}
	}
	checkList("spec.command", s.Command)
	checkList("spec.args", s.Args)
	for _, k := range sortedStringKeys(s.Env) {
		if strings.ContainsRune(s.Env[k], 0) {
			errs.add(childPath("spec.env", k), "contains a NUL byte, which no process can receive")
		}
	}
	if strings.ContainsRune(s.WorkingDir, 0) {
		errs.add("spec.workingDir", "contains a NUL byte")
	}
	if strings.ContainsRune(s.Image, 0) {
		errs.add("spec.image", "contains a NUL byte")
	}
	if h := s.HealthCheck; h != nil && h.Exec != nil {
		checkList("spec.healthCheck.exec.command", h.Exec.Command)
	}
	return errs
}

// ValidateServiceInCluster checks what a service asks of its cluster:
// groups it pins exist, and one replica fits a machine some group can
// launch (after systemReserved). Where the cluster's provider has no
// catalog (machines joined by hand), the fit is not checked.
func ValidateServiceInCluster(svc *api.Service, c *api.Cluster, providers Providers) ErrorList {
	if c.Kubernetes() {
		// Kubernetes says itself whether a Pod fits a node.
		return validateServiceOnKubernetes(svc)
	}
	var errs ErrorList
	groups := map[string]bool{}
	for _, g := range c.Spec.CapacityGroups {
		groups[g.GroupID] = true
	}
	for i, g := range svc.Spec.Placement.CapacityGroups {
		if !groups[g] {
			errs.add(indexPath("spec.placement.capacityGroups", i), "cluster %q has no capacity group %q", c.Metadata.Name, g)
		}
	}
	if errs != nil || providers == nil {
		return errs
	}
	if err := runtimeOffered(svc.Spec, c, providers.Runtimes(c.Spec.Provider.Name)); err != nil {
		return ErrorList{err}
	}
	catalog, ok := providers.Catalog(c.Spec.Provider)
	if !ok {
		return nil
	}
	return fitsSomeMachine(svc.Spec, c, catalog)
}

// runtimeOffered refuses an image on a cluster whose machines run
// processes only (a replica would wait for a docker runtime forever),
// where the provider says what its machines run (hand-joined machines
// report it themselves).
func runtimeOffered(s api.ServiceSpec, c *api.Cluster, runtimes []string) *FieldError {
	if s.Image == "" || len(runtimes) == 0 || contains(runtimes, "docker") {
		return nil
	}
	hint := "give spec.command instead"
	if len(s.Command) > 0 {
		hint = "drop spec.image to run spec.command as a process"
	}
	return &FieldError{Path: "spec.image", Message: fmt.Sprintf("cluster %q runs no containers: its machines (provider %s) offer only the %s runtime; %s, or run the service on a cluster whose machines run docker",
		c.Metadata.Name, c.Spec.Provider.Name, strings.Join(runtimes, ", "), hint)}
}

// machineShape is what one machine a group can launch offers.
type machineShape struct {
	group, instanceType string
	allocatable         api.Resources
	gpus                []provisioner.GPU
}

func launchable(c *api.Cluster, pinned []string, catalog []provisioner.InstanceType) []machineShape {
	reserved := Reserved(c.Spec.SystemReserved)
	var out []machineShape
	for _, g := range c.Spec.CapacityGroups {
		if len(pinned) > 0 && !contains(pinned, g.GroupID) {
			continue
		}
		types, err := provisioner.GroupTypes(catalog, g)
		if err != nil {
			continue
		}
		for _, it := range types {
			out = append(out, machineShape{group: g.GroupID, instanceType: it.Name, allocatable: api.Allocatable(it.Resources(), reserved), gpus: it.GPUs})
		}
	}
	return out
}

func fitsSomeMachine(s api.ServiceSpec, c *api.Cluster, catalog []provisioner.InstanceType) ErrorList {
	shapes := launchable(c, s.Placement.CapacityGroups, catalog)
	if len(shapes) == 0 {
		return nil // the cluster's own validation says why its groups launch nothing
	}
	req := Requests(s)
	var errs ErrorList
	for _, sh := range shapes {
		if sh.allocatable.Fits(req) && gpusFit(s.Resources.GPU, sh.gpus) {
			return nil
		}
	}
	largest := shapes[0]
	for _, sh := range shapes[1:] {
		if sh.allocatable.MilliCPU+sh.allocatable.MemoryBytes>>20 > largest.allocatable.MilliCPU+largest.allocatable.MemoryBytes>>20 {
			largest = sh
		}
	}
	offers := fmt.Sprintf("the largest machine its capacity groups can launch (%s in group %s) offers cpu %s, memory %s after systemReserved",
		largest.instanceType, largest.group, api.FormatCPU(largest.allocatable.MilliCPU), api.FormatBytes(largest.allocatable.MemoryBytes))
	dims := []struct {
		path string
		over func(api.Resources) bool
	}{
		{"spec.resources.cpu", func(a api.Resources) bool { return req.MilliCPU > a.MilliCPU }},
		{"spec.resources.memory", func(a api.Resources) bool { return req.MemoryBytes > a.MemoryBytes }},
		{"spec.resources.ephemeralStorage", func(a api.Resources) bool { return req.EphemeralBytes > a.EphemeralBytes }},
	}
	for _, d := range dims {
		over := true
		for _, sh := range shapes {
			over = over && d.over(sh.allocatable)
		}
		if over {
			errs.add(d.path, "one replica asks more than any machine of cluster %q can give: %s%s", c.Metadata.Name, offers, cpuUnitHint(d.path, s.Resources.CPU))
		}
	}
	if gpu := s.Resources.GPU; gpu != nil && gpu.Policy == api.GPURequired {
		fits := false
		for _, sh := range shapes {
			fits = fits || gpusFit(gpu, sh.gpus)
		}
		if !fits {
			errs.add("spec.resources.gpu", "no machine of cluster %q has %s: its capacity groups offer %s", c.Metadata.Name, describeGPURequest(*gpu), describeGPUOffers(shapes))
		}
	}
	if errs == nil {
		errs.add("spec.resources", "no machine of cluster %q fits one replica (cpu, memory, storage and GPUs together): %s", c.Metadata.Name, offers)
	}
	return errs
}

// cpuUnitHint suggests millicores for a cpu written as a large plain
// number (500 CPUs is likelier meant as 500m).
func cpuUnitHint(path, cpu string) string {
	if path != "spec.resources.cpu" || !isPlainNumber(cpu) {
		return ""
	}
	return fmt.Sprintf(" (cpu %s is %s CPUs: did you mean %sm?)", cpu, cpu, cpu)
}

func describeGPURequest(g api.GPURequirement) string {
	out := fmt.Sprintf("%d GPU(s)", g.Count)
	if g.Type != "" {
		out += " of type " + g.Type
	}
	if g.MinVRAMGB > 0 {
		out += fmt.Sprintf(" with at least %g GB of VRAM", g.MinVRAMGB)
	}
	return out
}

// describeGPUOffers lists the GPUs each instance type of the groups has.
func describeGPUOffers(shapes []machineShape) string {
	var offers []string
	seen := map[string]bool{}
	for _, sh := range shapes {
		for _, g := range sh.gpus {
			o := fmt.Sprintf("%s: %d × %s (%g GB)", sh.instanceType, g.Count, g.Type, g.VRAMGB)
			if !seen[o] {
				seen[o] = true
				offers = append(offers, o)
			}
		}
	}
	if len(offers) == 0 {
		return "no GPUs"
	}
	return strings.Join(offers, ", ")
}

// gpusFit reports whether a machine's GPUs can meet a required GPU
// request (a preferred one always fits: it runs on CPU otherwise).
func gpusFit(req *api.GPURequirement, gpus []provisioner.GPU) bool {
	if req == nil || req.Policy != api.GPURequired {
		return true
	}
	n := 0
	for _, g := range gpus {
		if (req.Type == "" || g.Type == req.Type) && g.VRAMGB >= req.MinVRAMGB {
			n += g.Count
		}
	}
	return n >= req.Count
}

// validateReserved refuses a systemReserved that leaves the machines of a
// group no CPU or memory.
func validateReserved(c *api.Cluster, catalog []provisioner.InstanceType) ErrorList {
	var errs ErrorList
	reserved := Reserved(c.Spec.SystemReserved)
	if reserved == (api.Resources{}) {
		return nil
	}
	for _, g := range c.Spec.CapacityGroups {
		types, err := provisioner.GroupTypes(catalog, g)
		if err != nil || len(types) == 0 {
			continue
		}
		left := false
		for _, it := range types {
			a := api.Allocatable(it.Resources(), reserved)
			left = left || (a.MilliCPU > 0 && a.MemoryBytes > 0)
		}
		if !left {
			errs.add("spec.systemReserved", "leaves the machines of group %q (%s) no CPU or memory for replicas", g.GroupID, types[0].Name)
		}
	}
	return errs
}
