package local

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/provisioner"
)

// hostAgent is an agent process of a local machine, as its arguments
// describe it.
type hostAgent struct {
	pid          int
	id           string
	instanceType string
	capacityType string
	tags         map[string]string
	args         []string
	started      time.Time
}

// scanHost finds the agent processes of local machines on this host: a
// `gantry agent` whose --provider-id is a local instance id and whose
// tags say Gantry launched it. Whose machines they are is for the caller
// to match (by the installation's tag): never a process chosen by its
// name alone.
func scanHost() []hostAgent {
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []hostAgent
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err != nil {
			continue
		}
		a, ok := parseAgent(strings.Split(strings.TrimSuffix(string(cmdline), "\x00"), "\x00"))
		if !ok {
			continue
		}
		a.pid = pid
		if info, err := os.Stat(filepath.Join("/proc", d.Name())); err == nil {
			a.started = info.ModTime().UTC()
		}
		out = append(out, a)
	}
	return out
}

// parseAgent reads an agent's command line (argv).
func parseAgent(argv []string) (hostAgent, bool) {
	if len(argv) < 2 || argv[1] != "agent" {
		return hostAgent{}, false
	}
	a := hostAgent{tags: map[string]string{}}
	for i := 2; i < len(argv); i++ {
		flag, value := argv[i], ""
		if i+1 < len(argv) {
			value = argv[i+1]
		}
		switch flag {
		case "--provider-id":
			a.id = value
		case "--instance-type":
			a.instanceType = value
		case "--capacity-type":
			a.capacityType = value
		case "--tag":
			if k, v, ok := strings.Cut(value, "="); ok {
				a.tags[k] = v
			}
		case "--join-token-file":
			i++ // a restart rejoins with its credential, not the token
			continue
		default:
			a.args = append(a.args, flag)
			continue
		}
		a.args = append(a.args, flag, value)
		i++
	}
	a.args = append([]string{"agent"}, a.args...)
	ok := strings.HasPrefix(a.id, "local-") && a.tags[provisioner.TagManagedBy] == provisioner.ManagedByValue
	return a, ok
}

// adoptFromHost records the running local machines of this provider's
// installation it has no record of (another server of the installation
// launched them): from then on they are its own (described, listed,
// stopped, terminated). Machines of other installations on the host are
// never touched. Callers hold p.mu.
func (p *Provider) adoptFromHost() {
	if p.cfg.Installation == "" {
		return
	}
	adopted := false
	for _, a := range scanHost() {
		if _, known := p.records[a.id]; known || a.tags[provisioner.TagInstallation] != p.cfg.Installation {
			continue
		}
		p.records[a.id] = &record{Key: a.tags[provisioner.TagLaunchKey], PID: a.pid, Args: a.args, Instance: provisioner.Instance{
			ID: a.id, State: provisioner.StateRunning, InstanceType: a.instanceType, CapacityType: a.capacityType, Zone: Zone,
			LaunchedAt: a.started, Tags: a.tags, Addresses: []string{"127.0.0.1"},
		}}
		adopted = true
	}
	if adopted {
		_ = p.save()
	}
}
