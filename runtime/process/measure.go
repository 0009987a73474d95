package process

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/runtime"
)

// userHZ is the kernel's clock tick for /proc's CPU times (USER_HZ: 100
// on every architecture Linux runs Gantry on).
const userHZ = 100

// Measure sums the CPU time and resident memory of the replica's process
// group (the replica and what it started), from /proc.
func (t *task) Measure(context.Context) (runtime.Sample, error) {
	select {
	case <-t.group.Done(): // the group ended; its id may be another's now
		return runtime.Sample{}, nil
	default:
	}
	pgid := t.group.Pid()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return runtime.Sample{}, fmt.Errorf("measure: %w", err)
	}
	var s runtime.Sample
	page := int64(os.Getpagesize())
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, ok := readStat(pid)
		if !ok || st.pgrp != pgid {
			continue
		}
		s.CPU += time.Duration(st.ticks) * time.Second / userHZ
		s.MemoryBytes += st.rssPages * page
	}
	return s, nil
}

type procStat struct {
	pgrp, ticks int
	rssPages    int64
}

// readStat reads a process's group, CPU ticks (user and system) and
// resident pages from /proc/PID/stat.
func readStat(pid int) (procStat, bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, false
	}
	// The command name, in parentheses, may hold spaces: fields start
	// after it, with the state (field 3) first.
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 22 {
		return procStat{}, false
	}
	field := func(n int) int { v, _ := strconv.Atoi(f[n-3]); return v } // n is stat(5)'s field number
	return procStat{pgrp: field(5), ticks: field(14) + field(15), rssPages: int64(field(24))}, true
}
