package exec

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/provisioner"
)

// Commands are the operator's shell command templates. Launch and
// Terminate are required; without Describe the provider trusts its own
// records; without List it lists its records; without Stop/Start the
// provider does not support a stopped warm pool.
//
// Placeholders ({{name}}) are replaced by shell-quoted literals, so no
// value (a label, a tag) can inject shell syntax; the same values are also
// in the environment as GANTRY_<NAME>. See Placeholders.
type Commands struct {
	Launch    string `json:"launch"`
	Terminate string `json:"terminate"`
	Describe  string `json:"describe,omitempty"`
	List      string `json:"list,omitempty"`
	Stop      string `json:"stop,omitempty"`
	Start     string `json:"start,omitempty"`
	// Console prints a machine's console output (boot log), shown when it
	// fails to join.
	Console string `json:"console,omitempty"`
	// Route has the operator's network route a machine's /24 ({{subnet}})
	// to the machine ({{provider_id}}) once it is launched, and Unroute
	// takes the route away once it is terminated: with both, clusters on
	// this provider may use network mode routed. Both must be idempotent
	// (a launch or terminate that failed half-way is tried again).
	Route   string `json:"route,omitempty"`
	Unroute string `json:"unroute,omitempty"`
}

// Routes says whether the commands route each machine's /24 to it.
func (c Commands) Routes() error {
	if c.Route == "" || c.Unroute == "" {
		return fmt.Errorf("the exec provider routes machines' /24s only with commands.route and commands.unroute in its settings")
	}
	return nil
}

// Placeholders are the values a template may use.
var Placeholders = []string{
	"provider_id", "instance_type", "cpu", "memory_mib", "memory_bytes", "zone", "capacity_type",
	"labels", "tags", "tags_json", "user_data", "user_data_file", "idempotency_key",
	"server_url", "cluster", "group", "machine", "join_token_file", "template_version", "subnet",
	"agent_runtime", "agent_binary_url_amd64", "agent_binary_sha256_amd64", "agent_binary_url_arm64", "agent_binary_sha256_arm64",
}

// Config is the exec provider's settings.
type Config struct {
	Commands Commands `json:"commands"`
	// Shell runs each command as `Shell -c template` (default /bin/sh).
	Shell string `json:"shell,omitempty"`
	// Timeout bounds each command (default 5m); it is killed after.
	Timeout time.Duration `json:"timeout,omitempty"`
	// InstanceTypes is the catalog; a type without offerings gets one per
	// zone at FlatPrice.
	InstanceTypes []provisioner.InstanceType `json:"instanceTypes"`
	Zones         []string                   `json:"zones,omitempty"`
	FlatPrice     float64                    `json:"flatPrice,omitempty"`
	// StateDir keeps the provider's records of its machines.
	StateDir string `json:"-"`
	// UserData renders a machine's user data (cloud-init); nil leaves
	// {{user_data}} empty (scripts that boot the agent themselves).
	UserData func(provisioner.LaunchSpec) (string, error) `json:"-"`
	// AgentRuntime is the runtime the machines' agents run replicas with
	// ({{agent_runtime}}, for scripts that start the agent themselves; the
	// server plans with it before the agents report). Default docker.
	AgentRuntime string `json:"-"`
}

var placeholderRe = regexp.MustCompile(`\{\{\s*([a-z_]+)\s*\}\}`)

// Validate names what is wrong with a configuration.
func (c Config) Validate() error {
	if strings.TrimSpace(c.Commands.Launch) == "" {
		return fmt.Errorf("commands.launch: required")
	}
	if strings.TrimSpace(c.Commands.Terminate) == "" {
		return fmt.Errorf("commands.terminate: required")
	}
	if (c.Commands.Stop == "") != (c.Commands.Start == "") {
		return fmt.Errorf("commands.stop and commands.start: give both or neither")
	}
	if (c.Commands.Route == "") != (c.Commands.Unroute == "") {
		return fmt.Errorf("commands.route and commands.unroute: give both or neither")
	}
	known := map[string]bool{}
	for _, p := range Placeholders {
		known[p] = true
	}
	for name, tmpl := range c.Commands.byName() {
		for _, m := range placeholderRe.FindAllStringSubmatch(tmpl, -1) {
			if !known[m[1]] {
				return fmt.Errorf("commands.%s: unknown placeholder {{%s}} (known: %s)", name, m[1], strings.Join(Placeholders, ", "))
			}
		}
	}
	if len(c.InstanceTypes) == 0 {
		return fmt.Errorf("instanceTypes: at least one is required")
	}
	for i, it := range c.InstanceTypes {
		if it.Name == "" || it.MilliCPU <= 0 || it.MemoryBytes <= 0 {
			return fmt.Errorf("instanceTypes[%d]: name, milliCpu and memoryBytes are required", i)
		}
		if len(it.Offerings) == 0 && c.FlatPrice <= 0 {
			return fmt.Errorf("instanceTypes[%d] (%s): no offerings and no flatPrice", i, it.Name)
		}
	}
	return nil
}

func (c Commands) byName() map[string]string {
	return map[string]string{"launch": c.Launch, "terminate": c.Terminate, "describe": c.Describe, "list": c.List, "stop": c.Stop, "start": c.Start, "console": c.Console, "route": c.Route, "unroute": c.Unroute}
}

// catalog fills offerings of types that have none from the flat price.
func (c Config) catalog() []provisioner.InstanceType {
	zones := c.Zones
	if len(zones) == 0 {
		zones = []string{"default"}
	}
	out := make([]provisioner.InstanceType, 0, len(c.InstanceTypes))
	for _, it := range c.InstanceTypes {
		if len(it.Offerings) == 0 {
			for _, z := range zones {
				it.Offerings = append(it.Offerings, provisioner.Offering{Zone: z, CapacityType: "onDemand", PricePerHour: c.FlatPrice})
			}
		}
		out = append(out, it)
	}
	return out
}

// expand replaces placeholders by shell-quoted values.
func expand(tmpl string, values map[string]string) string {
	return placeholderRe.ReplaceAllStringFunc(tmpl, func(m string) string {
		name := placeholderRe.FindStringSubmatch(m)[1]
		return shellQuote(values[name])
	})
}

// shellQuote makes a single-quoted POSIX shell word: nothing inside is
// interpreted.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// pairs renders a map as sorted k=v,k=v.
func pairs(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, ",")
}
