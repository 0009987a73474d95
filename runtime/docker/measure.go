package docker

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/gantry-dev/gantry/runtime"
)

// Measure reads the engine's one-shot statistics of the container: its
// CPU time so far and its memory in use without the page cache it can
// give back (as docker stats shows it).
func (t *task) Measure(ctx context.Context) (runtime.Sample, error) {
	res, err := t.driver.cli.ContainerStats(ctx, t.id, client.ContainerStatsOptions{})
	if err != nil {
		return runtime.Sample{}, fmt.Errorf("stats of %s: %w", t.name, err)
	}
	defer res.Body.Close()
	var st container.StatsResponse
	if err := json.NewDecoder(res.Body).Decode(&st); err != nil {
		return runtime.Sample{}, fmt.Errorf("stats of %s: %w", t.name, err)
	}
	mem := st.MemoryStats.Usage
	for _, cache := range []string{"inactive_file", "total_inactive_file"} { // cgroup v2, v1
		if v, ok := st.MemoryStats.Stats[cache]; ok && v < mem {
			mem -= v
			break
		}
	}
	return runtime.Sample{CPU: time.Duration(st.CPUStats.CPUUsage.TotalUsage), MemoryBytes: int64(mem)}, nil
}
