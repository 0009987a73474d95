package scheduler

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gantry-dev/gantry/api"
)

// staticFit checks what does not change as replicas are placed.
func staticFit(m *Machine, r *Replica) string {
	switch {
	case m.Cluster != r.Cluster:
		return "other cluster"
	case len(r.Groups) > 0 && !slices.Contains(r.Groups, m.Group):
		return "not in capacity groups " + strings.Join(r.Groups, ",")
	case !slices.Contains(m.Runtimes, r.Runtime):
		return "no " + r.Runtime + " runtime"
	case !api.LabelsMatch(m.Labels, r.NodeSelector):
		return "labels do not match nodeSelector"
	case r.Isolation == api.IsolationTEERequired && !m.TEE:
		return "no TEE runtime (isolation teeRequired: prerequisite missing)"
	case r.GPU != nil && !r.GPU.Preferred && matchingGPUs(m, r.GPU, false) < r.GPU.Count:
		return gpuShortfall(r.GPU)
	}
	return ""
}

func gpuShortfall(g *GPUNeed) string {
	what := "gpu"
	if g.Type != "" {
		what = g.Type + " gpu"
	}
	if g.MinVRAMGB > 0 {
		what += fmt.Sprintf(" with %gGB VRAM", g.MinVRAMGB)
	}
	return fmt.Sprintf("fewer than %d %s", g.Count, what)
}

// dynamicFit checks free resources, free GPUs (when withGPU) and
// dedication; it returns the GPU devices to give.
func dynamicFit(m *Machine, r *Replica, withGPU bool) (string, []int) {
	if m.excluded {
		return "being emptied", nil
	}
	if r.Dedicated && m.ServiceCount[r.Service] > 0 {
		return "dedicated: already runs a replica of " + r.Service, nil
	}
	free := m.Allocatable.Sub(m.Allocated)
	switch {
	case r.Requests.MilliCPU > free.MilliCPU:
		return "insufficient cpu", nil
	case r.Requests.MemoryBytes > free.MemoryBytes:
		return "insufficient memory", nil
	case r.Requests.EphemeralBytes > free.EphemeralBytes:
		return "insufficient ephemeral storage", nil
	}
	if !withGPU || r.GPU == nil {
		return "", nil
	}
	gpus := freeGPUs(m, r.GPU)
	if len(gpus) < r.GPU.Count {
		return "insufficient free gpus", nil
	}
	return "", gpus[:r.GPU.Count]
}

// Eligible returns "" when the replica could ever go on the machine (its
// cluster, groups, runtime, labels, TEE and GPU kind), whatever runs there
// now, or the first reason it could not.
func Eligible(m *Machine, r Replica) string { return staticFit(m, &r) }

// Fits returns "" when the replica may go on the machine, or the first
// reason it may not. Spread is not checked: it depends on other machines.
func Fits(m *Machine, r Replica) string {
	if why := staticFit(m, &r); why != "" {
		return why
	}
	why, _ := dynamicFit(m, &r, r.GPU != nil && !r.GPU.Preferred)
	return why
}

func gpuMatches(g GPU, need *GPUNeed) bool {
	return (need.Type == "" || g.Type == need.Type) && g.VRAMGB >= need.MinVRAMGB
}

// matchingGPUs counts devices that match the need (free ones only, when
// freeOnly).
func matchingGPUs(m *Machine, need *GPUNeed, freeOnly bool) int {
	n := 0
	for _, g := range m.GPUs {
		if gpuMatches(g, need) && (!freeOnly || !g.Used) {
			n++
		}
	}
	return n
}

func freeGPUs(m *Machine, need *GPUNeed) []int {
	var out []int
	for _, g := range m.GPUs {
		if !g.Used && gpuMatches(g, need) {
			out = append(out, g.Index)
		}
	}
	return out
}

// NoMachineReason is why a replica waits when its cluster has no machine
// that takes replicas.
const NoMachineReason = "no machine of the cluster takes replicas (none joined and schedulable, or none in the cluster's network: see its machines' conditions)"

// missTally counts the machines that miss for each reason. The reasons
// are few, and most machines in a row give the same (often the very same
// string): a short list searched from the last reason met, not a map
// hashing each of 10,000 machines' reasons for every class explained.
type missTally struct {
	whys   []string
	counts []int
	last   int
	total  int
}

func (t *missTally) add(why string) {
	if t.last < len(t.whys) && t.whys[t.last] == why {
		t.counts[t.last]++
		return
	}
	if i := slices.Index(t.whys, why); i >= 0 {
		t.counts[i]++
		t.last = i
		return
	}
	t.whys, t.counts, t.last = append(t.whys, why), append(t.counts, 1), len(t.whys)
}

// reason reads like Kubernetes': "0/3 machines fit: 2 insufficient cpu, 1 no docker runtime".
// With no machine at all it says what the scheduler is given: joined,
// schedulable machines that, in an overlay or routed cluster, are in its
// network (a joined machine whose NetworkReady is False is not).
func (t *missTally) reason() string {
	if t.total == 0 {
		return NoMachineReason
	}
	order := make([]int, len(t.whys))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(t.whys[a], t.whys[b]) })
	parts := make([]string, len(order))
	for k, i := range order {
		parts[k] = fmt.Sprintf("%d %s", t.counts[i], t.whys[i])
	}
	return fmt.Sprintf("0/%d machines fit: %s", t.total, strings.Join(parts, ", "))
}
