package local

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gantry-dev/gantry/internal/atomicfile"
	"github.com/gantry-dev/gantry/provisioner"
)

func (p *Provider) statePath() string { return filepath.Join(p.cfg.StateDir, "instances.json") }

func (p *Provider) load() error {
	var records []*record
	if _, err := atomicfile.ReadJSON(p.statePath(), &records); err != nil {
		return fmt.Errorf("local provider state: %w", err)
	}
	for _, r := range records {
		// Recorded, and maybe started, but its pid never saved (the server
		// died in between): the agent carries its instance id in its
		// arguments, so it is found again by it; one that never started is
		// gone for good (its join token went with that server).
		if r.State == provisioner.StatePending && r.PID == 0 {
			r.State = provisioner.StateTerminated
			if pid, ok := findAgent(r.ID); ok {
				r.State, r.PID = provisioner.StateRunning, pid
				if len(r.Addresses) == 0 {
					r.Addresses = []string{"127.0.0.1"}
				}
			}
		}
		p.records[r.ID] = r
	}
	return p.save()
}

// findAgent finds a running process whose arguments include the instance
// id (the agent's --provider-id).
func findAgent(id string) (int, bool) {
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return 0, false
	}
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cmdline), "\x00"+id+"\x00") {
			return pid, true
		}
	}
	return 0, false
}

// save writes the instance table atomically. Callers hold p.mu.
func (p *Provider) save() error {
	records := make([]*record, 0, len(p.records))
	for _, r := range p.records {
		records = append(records, r)
	}
	return atomicfile.WriteJSON(p.statePath(), records)
}
