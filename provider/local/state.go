package local

import (
	"fmt"
	"path/filepath"

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
		// Recorded but never started (the server died in between): the
		// join token is gone with that server, so the boot failed.
		if r.State == provisioner.StatePending && r.PID == 0 {
			r.State = provisioner.StateTerminated
		}
		p.records[r.ID] = r
	}
	return nil
}

// save writes the instance table atomically. Callers hold p.mu.
func (p *Provider) save() error {
	records := make([]*record, 0, len(p.records))
	for _, r := range p.records {
		records = append(records, r)
	}
	return atomicfile.WriteJSON(p.statePath(), records)
}
