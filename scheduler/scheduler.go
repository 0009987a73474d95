// Package scheduler places replicas on machines. It is a pure function of a
// snapshot: the same input always gives the same output, and no machine is
// ever allocated beyond its allocatable resources.
package scheduler

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gantry-dev/gantry/api"
)

// Runtimes a machine can offer.
const (
	RuntimeProcess = "process"
	RuntimeDocker  = "docker"
)

// Machine is a schedulable machine in the snapshot.
type Machine struct {
	ID          string
	Cluster     string
	Group       string
	Zone        string
	Labels      map[string]string
	Runtimes    []string
	Allocatable api.Resources
	Allocated   api.Resources
	// ServiceCount is how many replicas of each service already run here.
	ServiceCount map[string]int
}

// Free is what is left to allocate.
func (m *Machine) Free() api.Resources { return m.Allocatable.Sub(m.Allocated) }

// Replica is a replica to place, with what it asks of its machine.
type Replica struct {
	ID       string
	Service  string
	Cluster  string
	Index    int
	Requests api.Resources
	Runtime  string
	// Groups pins the replica to capacity groups (any group when empty).
	Groups       []string
	NodeSelector map[string]string
	Dedicated    bool
	Priority     int
	// Spread limits the skew of this service's replicas over machines or
	// zones (counted among the machines the replica may use).
	Spread []api.SpreadRule
}

// Placement assigns a replica to a machine.
type Placement struct {
	ReplicaID string
	MachineID string
}

// Result is the outcome of a scheduling pass.
type Result struct {
	Placements []Placement
	// Unplaced maps a replica to why no machine took it.
	Unplaced map[string]string
}

// Schedule places pending replicas, highest priority first, each on the
// feasible machine it packs best (most allocated after placement). Machines
// are updated in place with what was allocated.
func Schedule(machines []*Machine, pending []Replica) Result {
	sortMachines(machines)
	SortReplicas(pending)
	res := Result{Unplaced: map[string]string{}}
	for _, r := range pending {
		best, reason := pick(machines, r)
		if best == nil {
			res.Unplaced[r.ID] = reason
			continue
		}
		Assign(best, r)
		res.Placements = append(res.Placements, Placement{ReplicaID: r.ID, MachineID: best.ID})
	}
	return res
}

// Assign books a replica's requests on a machine.
func Assign(m *Machine, r Replica) {
	m.Allocated = m.Allocated.Add(r.Requests)
	if m.ServiceCount == nil {
		m.ServiceCount = map[string]int{}
	}
	m.ServiceCount[r.Service]++
}

// SortReplicas orders replicas for placement: priority, then largest
// first (first-fit decreasing packs better), then by name for determinism.
func SortReplicas(rs []Replica) {
	sort.SliceStable(rs, func(i, j int) bool {
		a, b := rs[i], rs[j]
		if a.Priority != b.Priority {
			return a.Priority > b.Priority
		}
		if a.Requests.MilliCPU != b.Requests.MilliCPU {
			return a.Requests.MilliCPU > b.Requests.MilliCPU
		}
		if a.Requests.MemoryBytes != b.Requests.MemoryBytes {
			return a.Requests.MemoryBytes > b.Requests.MemoryBytes
		}
		if a.Service != b.Service {
			return a.Service < b.Service
		}
		return a.Index < b.Index
	})
}

func sortMachines(ms []*Machine) {
	sort.Slice(ms, func(i, j int) bool { return ms[i].ID < ms[j].ID })
}

func pick(machines []*Machine, r Replica) (*Machine, string) {
	var misses missTally
	eligible := make([]*Machine, 0, len(machines))
	for _, m := range machines {
		if why := staticFit(m, r); why != "" {
			misses.add(why)
			continue
		}
		eligible = append(eligible, m)
	}
	spread := newSpreadCheck(eligible, r)
	var best *Machine
	bestScore := -1.0
	for _, m := range eligible {
		why := resourceFit(m, r)
		if why == "" {
			why = spread.violation(m)
		}
		if why != "" {
			misses.add(why)
			continue
		}
		if s := packScore(m, r); s > bestScore {
			best, bestScore = m, s
		}
	}
	if best == nil {
		return nil, misses.reason(len(machines))
	}
	return best, ""
}

// Fits returns "" when the replica may go on the machine, or the first
// reason it may not. Spread is not checked: it depends on other machines.
func Fits(m *Machine, r Replica) string {
	if why := staticFit(m, r); why != "" {
		return why
	}
	return resourceFit(m, r)
}

// staticFit checks what does not change as replicas are placed.
func staticFit(m *Machine, r Replica) string {
	switch {
	case m.Cluster != r.Cluster:
		return "other cluster"
	case len(r.Groups) > 0 && !containsString(r.Groups, m.Group):
		return "not in capacity groups " + strings.Join(r.Groups, ",")
	case !containsString(m.Runtimes, r.Runtime):
		return "no " + r.Runtime + " runtime"
	case !labelsMatch(m.Labels, r.NodeSelector):
		return "labels do not match nodeSelector"
	}
	return ""
}

func resourceFit(m *Machine, r Replica) string {
	if r.Dedicated && m.ServiceCount[r.Service] > 0 {
		return "dedicated: already runs a replica of " + r.Service
	}
	free := m.Free()
	switch {
	case r.Requests.MilliCPU > free.MilliCPU:
		return "insufficient cpu"
	case r.Requests.MemoryBytes > free.MemoryBytes:
		return "insufficient memory"
	case r.Requests.EphemeralBytes > free.EphemeralBytes:
		return "insufficient ephemeral storage"
	case r.Requests.GPUs > free.GPUs:
		return "insufficient gpus"
	}
	return ""
}

// packScore is the mean share of CPU and memory in use after placement:
// higher packs tighter.
func packScore(m *Machine, r Replica) float64 {
	after := m.Allocated.Add(r.Requests)
	return (share(after.MilliCPU, m.Allocatable.MilliCPU) + share(after.MemoryBytes, m.Allocatable.MemoryBytes)) / 2
}

func share(used, total int64) float64 {
	if total <= 0 {
		return 0
	}
	return float64(used) / float64(total)
}

type missTally struct {
	counts map[string]int
	order  []string
}

func (t *missTally) add(why string) {
	if t.counts == nil {
		t.counts = map[string]int{}
	}
	if t.counts[why] == 0 {
		t.order = append(t.order, why)
	}
	t.counts[why]++
}

// reason reads like Kubernetes': "0/3 machines fit: 2 insufficient cpu, 1 no docker runtime".
func (t *missTally) reason(total int) string {
	if total == 0 {
		return "no joined machine in the cluster"
	}
	sort.Strings(t.order)
	parts := make([]string, len(t.order))
	for i, why := range t.order {
		parts[i] = fmt.Sprintf("%d %s", t.counts[why], why)
	}
	return fmt.Sprintf("0/%d machines fit: %s", total, strings.Join(parts, ", "))
}

func labelsMatch(labels, selector map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
