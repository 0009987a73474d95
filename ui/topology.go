package ui

import (
	"context"
	"net/url"
	"sort"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/client"
)

// topologyPage is Nomad's topology view: each machine of the page a box
// as wide as its CPU (against the page's largest), the replicas it runs
// inside it, each as wide as its share of the machine's CPU and colored
// by its state.
type topologyPage struct {
	Cluster  string
	Machines []machineBox
	Pager    pager
}

type machineBox struct {
	Machine api.Machine
	// Width is the box's width in pixels.
	Width    int
	Replicas []replicaBox
	// FreePct is the share of the machine's CPU no replica requests.
	FreePct int
}

type replicaBox struct {
	Replica api.Replica
	// Pct is the replica's share of its machine's CPU (at least 1, so
	// that a replica that requests nothing still shows).
	Pct int
}

// Box widths, in pixels: the smallest machine's and the largest's.
const (
	minBoxWidth = 140
	maxBoxWidth = 420
)

// loadTopology reads a page of machines and the replicas placed on them.
func loadTopology(ctx context.Context, c *client.Client, q url.Values, d *Dashboard) (any, error) {
	cluster := q.Get("cluster")
	machines, p, err := window(q, d.cfg.PageSize, "/ui/topology", func(offset, limit int) ([]api.Machine, int, error) {
		return c.ListMachinesWindow(ctx, cluster, offset, limit)
	})
	if err != nil {
		return nil, err
	}
	replicas, err := c.ListReplicas(ctx, "")
	if err != nil {
		return nil, err
	}
	return topologyPage{Cluster: cluster, Machines: boxes(machines, replicas), Pager: p}, nil
}

// boxes lays out machines with the replicas placed on them, in the
// machines' order, each machine's replicas by service and index.
func boxes(machines []api.Machine, replicas []api.Replica) []machineBox {
	on := map[string][]api.Replica{}
	for _, r := range replicas {
		if r.Machine != "" {
			on[r.Machine] = append(on[r.Machine], r)
		}
	}
	var largest int64 = 1
	for _, m := range machines {
		largest = max(largest, m.Allocatable.MilliCPU)
	}
	out := make([]machineBox, 0, len(machines))
	for _, m := range machines {
		box := machineBox{Machine: m, Width: minBoxWidth + int(int64(maxBoxWidth-minBoxWidth)*max(0, m.Allocatable.MilliCPU)/largest), FreePct: 100}
		placed := on[m.ID]
		sortReplicas(placed)
		for _, r := range placed {
			pct := max(1, percent(r.Requests.MilliCPU, m.Allocatable.MilliCPU))
			box.Replicas = append(box.Replicas, replicaBox{Replica: r, Pct: pct})
			box.FreePct = max(0, box.FreePct-pct)
		}
		out = append(out, box)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Machine.Cluster < out[j].Machine.Cluster })
	return out
}
