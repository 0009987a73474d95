// Package policy reads the policies `gantry simulate` compares: each a
// named set of the server's decision settings (the flags of `gantry
// server` that decide: --savings-floor, --min-lifetime,
// --empty-machine-ttl, --max-removals, --reschedule-grace, …), written as
// a YAML mapping of setting to value. A key that is not such a setting, or
// a value the setting refuses, is refused with the file and key named,
// before any simulation runs.
package policy

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/decide"
	"github.com/gantry-dev/gantry/decide/settings"
	"github.com/gantry-dev/gantry/sim"
)

// Policy is one policy: its name and settings, in the file's order.
type Policy struct {
	Name     string
	File     string
	Settings []Setting
}

// Setting is one key and its value as written.
type Setting struct {
	Key, Value string
	Line       int
}

// at is where a setting is written, for its errors ("": not in a file).
func (s Setting) at() string {
	if s.Line == 0 {
		return ""
	}
	return fmt.Sprintf("line %d: ", s.Line)
}

// nameKey names the policy (the file's base name when absent).
const nameKey = "name"

// Read parses a policy file: a YAML mapping of setting to scalar value,
// and optionally name.
func Read(file string, data []byte) (Policy, error) {
	p := Policy{File: file, Name: strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return Policy{}, fmt.Errorf("policy %s: %w", file, err)
	}
	if len(doc.Content) == 0 {
		return p, nil // an empty policy: the defaults
	}
	m := doc.Content[0]
	if m.Kind != yaml.MappingNode {
		return Policy{}, fmt.Errorf("policy %s: line %d: want a mapping of setting to value", file, m.Line)
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if v.Kind != yaml.ScalarNode {
			return Policy{}, fmt.Errorf("policy %s: line %d: %q: want a single value", file, v.Line, k.Value)
		}
		if line, ok := seen[k.Value]; ok {
			return Policy{}, fmt.Errorf("policy %s: line %d: %q is set twice (line %d)", file, k.Line, k.Value, line)
		}
		seen[k.Value] = k.Line
		if k.Value == nameKey {
			p.Name = v.Value
			continue
		}
		p.Settings = append(p.Settings, Setting{Key: k.Value, Value: v.Value, Line: k.Line})
	}
	if p.Name == "" {
		return Policy{}, fmt.Errorf("policy %s: the name is empty", file)
	}
	return p, nil
}

// Apply sets the policy's settings on fs, which holds the decision flags
// bound to the configuration the policy's run uses. A key fs does not
// hold is refused with the settings it does hold.
func (p Policy) Apply(fs *pflag.FlagSet) error {
	var bad []error
	for _, s := range p.Settings {
		f := fs.Lookup(s.Key)
		if f == nil {
			bad = append(bad, fmt.Errorf("%s%q is not a server setting a policy can set (those are: %s)", s.at(), s.Key, strings.Join(Keys(fs), ", ")))
			continue
		}
		if err := fs.Set(s.Key, s.Value); err != nil {
			bad = append(bad, fmt.Errorf("%s%s: %w", s.at(), s.Key, err))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("policy %s (%s): %w", p.Name, p.File, errors.Join(bad...))
	}
	return nil
}

// Keys are the settings fs holds, sorted.
func Keys(fs *pflag.FlagSet) []string {
	var out []string
	fs.VisitAll(func(f *pflag.Flag) { out = append(out, f.Name) })
	slices.Sort(out)
	return out
}

// CheckNames refuses two policies of one name: their results would be
// reported side by side under it.
func CheckNames(ps []Policy) error {
	seen := map[string]string{}
	for _, p := range ps {
		if file, ok := seen[p.Name]; ok {
			return fmt.Errorf("policies %s and %s are both named %q", file, p.File, p.Name)
		}
		seen[p.Name] = p.File
	}
	return nil
}

// Resolve is the run of a policy: its settings applied to base (the
// defaults, or a server's own settings) through the decision flags of
// gantry server, and its group settings to every capacity group.
func Resolve(p Policy, base decide.Config) (sim.Policy, error) {
	sp := sim.Policy{Name: p.Name, Config: base}
	fs := pflag.NewFlagSet(p.Name, pflag.ContinueOnError)
	settings.Bind(fs, &sp.Config)
	var group api.CapacityGroup
	fs.StringVar(&group.CapacityType, "capacity-type", "", "every capacity group's capacity type: onDemand, spot or any")
	fs.IntVar(&group.WarmPool, "warm-pool", 0, "every capacity group's warm pool")
	fs.StringVar(&group.WarmPoolState, "warm-pool-state", "", "every capacity group's warm-pool state: running or stopped")
	if err := p.Apply(fs); err != nil {
		return sim.Policy{}, err
	}
	if err := checkGroupSettings(p, group); err != nil {
		return sim.Policy{}, err
	}
	for _, s := range p.Settings {
		sp.Settings = append(sp.Settings, s.Key+"="+s.Value)
	}
	changed := func(name string) bool { return fs.Changed(name) }
	if changed("capacity-type") || changed("warm-pool") || changed("warm-pool-state") {
		sp.Group = func(g *api.CapacityGroup) {
			if changed("capacity-type") {
				g.CapacityType = group.CapacityType
			}
			if changed("warm-pool") {
				g.WarmPool = group.WarmPool
			}
			if changed("warm-pool-state") {
				g.WarmPoolState = group.WarmPoolState
			}
		}
	}
	return sp, nil
}

func checkGroupSettings(p Policy, g api.CapacityGroup) error {
	switch g.CapacityType {
	case "", api.CapacityOnDemand, api.CapacitySpot, api.CapacityAny:
	default:
		return fmt.Errorf("policy %s (%s): capacity-type %q: want onDemand, spot or any", p.Name, p.File, g.CapacityType)
	}
	switch g.WarmPoolState {
	case "", api.WarmRunning, api.WarmStopped:
	default:
		return fmt.Errorf("policy %s (%s): warm-pool-state %q: want running or stopped", p.Name, p.File, g.WarmPoolState)
	}
	if g.WarmPool < 0 {
		return fmt.Errorf("policy %s (%s): warm-pool %d: want 0 or more", p.Name, p.File, g.WarmPool)
	}
	return nil
}
