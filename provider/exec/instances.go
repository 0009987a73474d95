package exec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"strings"

	"github.com/gantry-dev/gantry/provisioner"
)

// reported is what describe, list and start print.
type reported struct {
	ID        string            `json:"id"`
	State     string            `json:"state"`
	Addresses []string          `json:"addresses"`
	Tags      map[string]string `json:"tags"`
}

const stateNotFound = "not-found"

func parseState(s string) (provisioner.State, error) {
	switch st := provisioner.State(s); st {
	case provisioner.StatePending, provisioner.StateRunning, provisioner.StateStopping, provisioner.StateStopped,
		provisioner.StateTerminating, provisioner.StateTerminated:
		return st, nil
	}
	return "", fmt.Errorf("unknown state %q", s)
}

// record returns a copy of a machine's record.
func (p *Provider) record(id string) (*record, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.records[id]
	if !ok {
		return nil, false
	}
	cp := *r
	cp.Tags = maps.Clone(r.Tags)
	cp.Addresses = append([]string(nil), r.Addresses...)
	return &cp, true
}

// idValues are the placeholders of a command about one machine.
func idValues(r *record) map[string]string {
	return map[string]string{"provider_id": r.ID, "zone": r.Zone, "instance_type": r.InstanceType, "capacity_type": r.CapacityType,
		"tags": pairs(r.Tags), "machine": r.Tags[provisioner.TagMachine], "idempotency_key": r.Key}
}

// Terminate runs the terminate command; a machine already gone is not an
// error. Its token and user data files are removed.
func (p *Provider) Terminate(ctx context.Context, id string) error {
	r, ok := p.record(id)
	if !ok {
		r = &record{Instance: provisioner.Instance{ID: id}}
	}
	if ok && r.State == provisioner.StateTerminated {
		return nil
	}
	if _, err := p.run(ctx, "terminate", p.cfg.Commands.Terminate, idValues(r)); err != nil && !errors.Is(err, provisioner.ErrNotFound) {
		return err
	}
	if !ok {
		return nil
	}
	// The route goes once the machine is gone, so nothing else receives
	// its /24 meanwhile; a failed unroute is tried again with the
	// terminate.
	if r.Subnet != "" && r.Routed && p.cfg.Commands.Unroute != "" {
		values := idValues(r)
		values["subnet"] = r.Subnet
		if _, err := p.run(ctx, "unroute", p.cfg.Commands.Unroute, values); err != nil {
			return err
		}
	}
	if r.Dir != "" {
		_ = os.RemoveAll(r.Dir)
	}
	return p.setState(id, provisioner.StateTerminated, nil)
}

// Stop runs the stop command.
func (p *Provider) Stop(ctx context.Context, id string) error {
	if p.cfg.Commands.Stop == "" {
		return provisioner.Errorf(provisioner.KindUnsupported, "stop", "no stop command configured")
	}
	r, ok := p.record(id)
	if !ok || r.State == provisioner.StateTerminated {
		return provisioner.Errorf(provisioner.KindNotFound, "stop", "machine %s", id)
	}
	if _, err := p.run(ctx, "stop", p.cfg.Commands.Stop, idValues(r)); err != nil {
		return err
	}
	return p.setState(id, provisioner.StateStopped, []string{})
}

// Start runs the start command and returns the machine with its new
// addresses.
func (p *Provider) Start(ctx context.Context, id string) (*provisioner.Instance, error) {
	if p.cfg.Commands.Start == "" {
		return nil, provisioner.Errorf(provisioner.KindUnsupported, "start", "no start command configured")
	}
	r, ok := p.record(id)
	if !ok || r.State == provisioner.StateTerminated {
		return nil, provisioner.Errorf(provisioner.KindNotFound, "start", "machine %s", id)
	}
	out, err := p.run(ctx, "start", p.cfg.Commands.Start, idValues(r))
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(string(out)) != "" {
		if _, err := p.apply(id, out); err != nil {
			return nil, err
		}
	} else if err := p.setState(id, provisioner.StatePending, nil); err != nil {
		return nil, err
	}
	return p.Describe(ctx, id)
}

// Describe runs the describe command, or answers from the records.
func (p *Provider) Describe(ctx context.Context, id string) (*provisioner.Instance, error) {
	r, ok := p.record(id)
	if !ok {
		return nil, provisioner.Errorf(provisioner.KindNotFound, "describe", "machine %s", id)
	}
	if p.cfg.Commands.Describe == "" || r.State == provisioner.StateTerminated {
		if r.State == provisioner.StatePending && p.cfg.Commands.Describe == "" {
			// Without describe, a launch that returned is taken as running.
			_ = p.setState(id, provisioner.StateRunning, nil)
			r, _ = p.record(id)
		}
		inst := r.Instance
		return &inst, nil
	}
	out, err := p.run(ctx, "describe", p.cfg.Commands.Describe, idValues(r))
	if err != nil {
		return nil, err
	}
	return p.apply(id, out)
}

// apply records what a command printed about a machine.
func (p *Provider) apply(id string, out []byte) (*provisioner.Instance, error) {
	var rep reported
	if err := json.Unmarshal(out, &rep); err != nil {
		return nil, provisioner.Errorf(provisioner.KindTransport, "describe", "want a JSON object with state and addresses, got %q: %v", tail(string(out)), err)
	}
	if rep.State == stateNotFound {
		if err := p.setState(id, provisioner.StateTerminated, nil); err != nil {
			return nil, err
		}
		r, _ := p.record(id)
		inst := r.Instance
		return &inst, nil
	}
	st, err := parseState(rep.State)
	if err != nil {
		return nil, provisioner.Errorf(provisioner.KindTransport, "describe", "%v", err)
	}
	if err := p.setState(id, st, rep.Addresses); err != nil {
		return nil, err
	}
	r, _ := p.record(id)
	inst := r.Instance
	return &inst, nil
}

func (p *Provider) setState(id string, st provisioner.State, addresses []string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.records[id]
	if !ok {
		return nil
	}
	r.State = st
	if addresses != nil {
		r.Addresses = addresses
	}
	if st == provisioner.StateTerminated || st == provisioner.StateStopped {
		r.Addresses = nil
	}
	return p.saveLocked()
}

// List runs the list command when there is one (it finds machines the
// records lack, such as those of a launch interrupted by a crash), else
// describes every recorded machine.
func (p *Provider) List(ctx context.Context, filter provisioner.Filter) ([]provisioner.Instance, error) {
	var all []provisioner.Instance
	if p.cfg.Commands.List != "" {
		listed, err := p.listCommand(ctx)
		if err != nil {
			return nil, err
		}
		all = listed
	} else {
		p.mu.Lock()
		ids := make([]string, 0, len(p.records))
		for id := range p.records {
			ids = append(ids, id)
		}
		p.mu.Unlock()
		for _, id := range ids {
			inst, err := p.Describe(ctx, id)
			if err != nil {
				return nil, err
			}
			all = append(all, *inst)
		}
	}
	var out []provisioner.Instance
	for _, inst := range all {
		if filter.Matches(inst) {
			out = append(out, inst)
		}
	}
	return out, nil
}

func (p *Provider) listCommand(ctx context.Context) ([]provisioner.Instance, error) {
	out, err := p.run(ctx, "list", p.cfg.Commands.List, map[string]string{})
	if err != nil {
		return nil, err
	}
	var reps []reported
	if err := json.Unmarshal(out, &reps); err != nil {
		return nil, provisioner.Errorf(provisioner.KindTransport, "list", "want a JSON array, got %q: %v", tail(string(out)), err)
	}
	seen := map[string]bool{}
	var all []provisioner.Instance
	for _, rep := range reps {
		st, err := parseState(rep.State)
		if err != nil {
			return nil, provisioner.Errorf(provisioner.KindTransport, "list", "machine %s: %v", rep.ID, err)
		}
		inst := provisioner.Instance{ID: rep.ID, State: st, Addresses: rep.Addresses, Tags: rep.Tags}
		if r, ok := p.record(rep.ID); ok {
			_ = p.setState(rep.ID, st, rep.Addresses)
			inst = r.Instance
			inst.State = st
			if len(rep.Tags) > 0 {
				inst.Tags = rep.Tags
			}
		}
		seen[rep.ID] = true
		all = append(all, inst)
	}
	// Terminated machines vanish from clouds' lists but stay in the records.
	p.mu.Lock()
	for id, r := range p.records {
		if !seen[id] && r.State == provisioner.StateTerminated {
			all = append(all, r.Instance)
		}
	}
	p.mu.Unlock()
	return all, nil
}

// ConsoleOutput runs the console command (provisioner.ConsoleReader).
func (p *Provider) ConsoleOutput(ctx context.Context, id string) (string, error) {
	if p.cfg.Commands.Console == "" {
		return "", provisioner.Errorf(provisioner.KindUnsupported, "console", "no console command configured")
	}
	r, ok := p.record(id)
	if !ok {
		return "", provisioner.Errorf(provisioner.KindNotFound, "console", "machine %s", id)
	}
	out, err := p.run(ctx, "console", p.cfg.Commands.Console, idValues(r))
	return string(out), err
}
