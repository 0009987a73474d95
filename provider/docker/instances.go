package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/gantry-dev/gantry/internal/atomicfile"
	"github.com/gantry-dev/gantry/provisioner"
	dockerrt "github.com/gantry-dev/gantry/runtime/docker"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// Terminate stops the machine (its agent stops its replicas), removes any
// replica container still labeled with it, then the machine container.
func (p *Provider) Terminate(ctx context.Context, id string) error {
	inspected, err := p.inspect(ctx, id)
	if errors.Is(err, provisioner.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	inst := p.instance(inspected)
	if err := p.stopMachine(ctx, inspected); err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, p.cfg.RequestTimeout)
	defer cancel()
	if _, err := p.cli.ContainerRemove(rctx, inspected.ID, client.ContainerRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
		return classify("terminate", err)
	}
	_ = os.RemoveAll(p.secretsDir(inst.ID))
	inst.State = provisioner.StateTerminated
	return p.remember(inst)
}

// stopMachine stops the machine container gracefully, then removes the
// replica containers its agent left (a killed agent stops nothing).
func (p *Provider) stopMachine(ctx context.Context, c container.InspectResponse) error {
	secs := int(p.cfg.StopGrace.Seconds())
	sctx, cancel := context.WithTimeout(ctx, p.cfg.StopGrace+p.cfg.RequestTimeout)
	defer cancel()
	if _, err := p.cli.ContainerStop(sctx, c.ID, client.ContainerStopOptions{Timeout: &secs}); err != nil && !cerrdefs.IsNotFound(err) {
		return classify("stop", err)
	}
	machine := ""
	if c.Config != nil {
		machine = c.Config.Labels[provisioner.TagMachine]
	}
	if machine == "" {
		return nil
	}
	if err := dockerrt.RemoveReplicas(sctx, p.cli, machine, p.secretsDir(strings.TrimPrefix(c.Name, "/"))); err != nil {
		return classify("stop", err)
	}
	return nil
}

// Stop implements provisioner.Provisioner: the container stops and keeps
// its filesystem (the agent's credential) for Start.
func (p *Provider) Stop(ctx context.Context, id string) error {
	inspected, err := p.inspect(ctx, id)
	if err != nil {
		return err
	}
	return p.stopMachine(ctx, inspected)
}

// Start implements provisioner.Provisioner.
func (p *Provider) Start(ctx context.Context, id string) (*provisioner.Instance, error) {
	rctx, cancel := context.WithTimeout(ctx, p.cfg.RequestTimeout)
	defer cancel()
	if _, err := p.cli.ContainerStart(rctx, id, client.ContainerStartOptions{}); err != nil {
		if cerrdefs.IsNotFound(err) {
			return nil, provisioner.Errorf(provisioner.KindNotFound, "start", "machine %s not found", id)
		}
		return nil, classify("start", err)
	}
	return p.Describe(ctx, id)
}

// Describe implements provisioner.Provisioner.
func (p *Provider) Describe(ctx context.Context, id string) (*provisioner.Instance, error) {
	inspected, err := p.inspect(ctx, id)
	if errors.Is(err, provisioner.ErrNotFound) {
		p.mu.Lock()
		t, ok := p.gone[id]
		p.mu.Unlock()
		if ok {
			return &t.Instance, nil
		}
	}
	if err != nil {
		return nil, err
	}
	inst := p.instance(inspected)
	return &inst, nil
}

// List implements provisioner.Provisioner.
func (p *Provider) List(ctx context.Context, filter provisioner.Filter) ([]provisioner.Instance, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.RequestTimeout)
	defer cancel()
	all, err := p.list(ctx, filter.Tags)
	if err != nil {
		return nil, classify("list", err)
	}
	p.mu.Lock()
	for _, t := range p.gone {
		all = append(all, t.Instance)
	}
	p.mu.Unlock()
	var out []provisioner.Instance
	for _, inst := range all {
		if filter.Matches(inst) {
			out = append(out, inst)
		}
	}
	return out, nil
}

// list returns the machine containers whose labels include tags.
func (p *Provider) list(ctx context.Context, tags map[string]string) ([]provisioner.Instance, error) {
	filters := make(client.Filters).Add("label", labelKind+"="+kindMachine)
	for k, v := range tags {
		filters.Add("label", k+"="+v)
	}
	list, err := p.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: filters})
	if err != nil {
		return nil, err
	}
	out := make([]provisioner.Instance, 0, len(list.Items))
	for _, c := range list.Items {
		inspected, err := p.cli.ContainerInspect(ctx, c.ID, client.ContainerInspectOptions{})
		if cerrdefs.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, p.instance(inspected.Container))
	}
	return out, nil
}

func (p *Provider) inspect(ctx context.Context, id string) (container.InspectResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.RequestTimeout)
	defer cancel()
	inspected, err := p.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if cerrdefs.IsNotFound(err) || (err == nil && (inspected.Container.Config == nil || inspected.Container.Config.Labels[labelKind] != kindMachine)) {
		return container.InspectResponse{}, provisioner.Errorf(provisioner.KindNotFound, "describe", "machine %s not found", id)
	}
	if err != nil {
		return container.InspectResponse{}, classify("describe", err)
	}
	return inspected.Container, nil
}

// instance is a machine container in normalized form.
func (p *Provider) instance(c container.InspectResponse) provisioner.Instance {
	labels := map[string]string{}
	if c.Config != nil {
		labels = c.Config.Labels
	}
	tags := map[string]string{}
	for k, v := range labels {
		if k != labelKind && k != labelInstanceType && k != labelCapacityType && k != labelLaunchKey {
			tags[k] = v
		}
	}
	inst := provisioner.Instance{ID: strings.TrimPrefix(c.Name, "/"), InstanceType: labels[labelInstanceType], CapacityType: labels[labelCapacityType],
		Zone: Zone, Tags: tags}
	if created, err := time.Parse(time.RFC3339Nano, c.Created); err == nil {
		inst.LaunchedAt = created.UTC()
	}
	if c.State != nil {
		inst.State = stateOf(c.State.Status)
	}
	if inst.State == provisioner.StateRunning {
		inst.Addresses = networkAddress(c.NetworkSettings, p.cfg.Network)
	}
	return inst
}

// stateOf maps the engine's container states.
func stateOf(s container.ContainerState) provisioner.State {
	switch s {
	case container.StateRunning:
		return provisioner.StateRunning
	case container.StateExited, container.StatePaused:
		return provisioner.StateStopped
	case container.StateRemoving:
		return provisioner.StateTerminating
	case container.StateDead:
		return provisioner.StateTerminated
	}
	return provisioner.StatePending // created, restarting, unknown
}

// classify types engine errors for the fleet: no engine is a transport
// error, a bad request is invalid.
func classify(op string, err error) error {
	var typed *provisioner.Error
	switch {
	case errors.As(err, &typed):
		return err
	case cerrdefs.IsNotFound(err):
		return &provisioner.Error{Kind: provisioner.KindNotFound, Op: op, Err: err}
	case cerrdefs.IsInvalidArgument(err):
		return &provisioner.Error{Kind: provisioner.KindInvalid, Op: op, Err: err}
	case cerrdefs.IsPermissionDenied(err), cerrdefs.IsUnauthorized(err):
		return &provisioner.Error{Kind: provisioner.KindAuth, Op: op, Err: err}
	}
	return &provisioner.Error{Kind: provisioner.KindTransport, Op: op, Err: err}
}

// tombstone is a terminated machine, still described for a while.
type tombstone struct {
	provisioner.Instance
	TerminatedAt time.Time `json:"terminatedAt"`
}

// remember keeps a terminated machine for Describe and List.
func (p *Provider) remember(inst provisioner.Instance) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gone[inst.ID] = tombstone{Instance: inst, TerminatedAt: time.Now().UTC()}
	return p.saveLocked()
}

func (p *Provider) load() error {
	if p.cfg.StateDir == "" {
		return nil
	}
	if err := os.MkdirAll(p.cfg.StateDir, 0o700); err != nil {
		return fmt.Errorf("docker provider state dir: %w", err)
	}
	var gone []tombstone
	if _, err := atomicfile.ReadJSON(p.statePath(), &gone); err != nil {
		return fmt.Errorf("docker provider state: %w", err)
	}
	for _, t := range gone {
		p.gone[t.ID] = t
	}
	return nil
}

// saveLocked prunes records older than the retention and writes the rest.
func (p *Provider) saveLocked() error {
	if p.cfg.StateDir == "" {
		return nil
	}
	cutoff := time.Now().Add(-p.cfg.TerminatedRetention)
	gone := make([]tombstone, 0, len(p.gone))
	for id, t := range p.gone {
		if t.TerminatedAt.Before(cutoff) {
			delete(p.gone, id)
			continue
		}
		gone = append(gone, t)
	}
	return atomicfile.WriteJSON(p.statePath(), gone)
}
