package agent

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	goruntime "runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gantry-dev/gantry/api"
)

// detectCapacity reads this host's CPU, memory and disk (of dir).
func detectCapacity(dir string) api.Resources {
	r := api.Resources{MilliCPU: int64(goruntime.NumCPU()) * 1000}
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) >= 2 && fields[0] == "MemTotal:" {
				kb, _ := strconv.ParseInt(fields[1], 10, 64)
				r.MemoryBytes = kb << 10
			}
		}
		f.Close()
	}
	var st syscall.Statfs_t
	if syscall.Statfs(dir, &st) == nil {
		r.EphemeralBytes = int64(st.Blocks) * int64(st.Bsize)
	}
	return r
}

// nvidiaQuery is the nvidia-smi query whose output ParseNvidiaSMI reads.
var nvidiaQuery = []string{"--query-gpu=index,name,memory.total,uuid", "--format=csv,noheader,nounits"}

// detectGPUs asks nvidia-smi, when it is installed.
func detectGPUs(ctx context.Context, timeout time.Duration) ([]api.GPUDevice, error) {
	path, err := exec.LookPath("nvidia-smi")
	if err != nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, nvidiaQuery...).Output()
	if err != nil {
		return nil, fmt.Errorf("nvidia-smi: %w", err)
	}
	return ParseNvidiaSMI(string(out))
}

// ParseNvidiaSMI parses `nvidia-smi --query-gpu=index,name,memory.total,uuid
// --format=csv,noheader,nounits` (memory in MiB).
func ParseNvidiaSMI(out string) ([]api.GPUDevice, error) {
	var gpus []api.GPUDevice
	for n, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		fields := strings.Split(line, ",")
		if len(fields) < 3 {
			return nil, fmt.Errorf("nvidia-smi line %d: want index, name, memory.total: %q", n+1, line)
		}
		for i := range fields {
			fields[i] = strings.TrimSpace(fields[i])
		}
		idx, err := strconv.Atoi(fields[0])
		if err != nil {
			return nil, fmt.Errorf("nvidia-smi line %d: index %q", n+1, fields[0])
		}
		mib, err := strconv.ParseFloat(fields[2], 64)
		if err != nil {
			return nil, fmt.Errorf("nvidia-smi line %d: memory %q", n+1, fields[2])
		}
		g := api.GPUDevice{Index: idx, Type: gpuType(fields[1]), VRAMGB: float64(int(mib/1024*10+0.5)) / 10}
		if len(fields) > 3 {
			g.UUID = fields[3]
		}
		gpus = append(gpus, g)
	}
	return gpus, nil
}

// gpuType turns "NVIDIA A100-SXM4-80GB" into "nvidia-a100-sxm4-80gb".
func gpuType(name string) string {
	t := strings.ToLower(strings.TrimSpace(name))
	t = strings.NewReplacer(" ", "-", "_", "-").Replace(t)
	if !strings.HasPrefix(t, "nvidia") {
		t = "nvidia-" + t
	}
	return t
}
