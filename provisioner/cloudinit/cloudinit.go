// Package cloudinit renders the user data that turns a fresh cloud machine
// into a Gantry machine: a #cloud-config that downloads the gantry binary
// for the machine's architecture (checked against its SHA-256), writes the
// join token (mode 0600) and a systemd unit running `gantry agent`, and
// prints "[gantry-boot] <step>" markers to the console, so a machine that
// never joins tells how far it got.
package cloudinit

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/provisioner"
	"go.yaml.in/yaml/v3"
)

// Agent is how machines run the agent (what they download comes with the
// bootstrap: the cluster's agent.binaries).
type Agent struct {
	// Runtime is the agent's --runtime (default docker).
	Runtime string
	// ExtraArgs are appended to the agent's command line.
	ExtraArgs []string
}

// Machine is what is known of the machine at launch.
type Machine struct {
	Zone string
	// Labels become --label flags.
	Labels map[string]string
	// InstanceIDCommand, when set, is a shell command the boot script runs
	// to learn the machine's instance id from its cloud's metadata service
	// (best effort): the agent reports it at join, so a machine whose
	// launch answer was lost is known by its instance.
	InstanceIDCommand string
}

// Instance id lookups from each cloud's metadata service, as the id its
// provider names instances by.
const (
	AWSInstanceID   = `t=$(curl -fsS -m 5 -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 60' http://169.254.169.254/latest/api/token) && curl -fsS -m 5 -H "X-aws-ec2-metadata-token: $t" http://169.254.169.254/latest/meta-data/instance-id`
	GCPInstanceID   = `z=$(curl -fsS -m 5 -H 'Metadata-Flavor: Google' http://metadata.google.internal/computeMetadata/v1/instance/zone) && n=$(curl -fsS -m 5 -H 'Metadata-Flavor: Google' http://metadata.google.internal/computeMetadata/v1/instance/name) && echo "${z##*/}/$n"`
	AzureInstanceID = `curl -fsS -m 5 -H 'Metadata: true' 'http://169.254.169.254/metadata/instance/compute/name?api-version=2021-02-01&format=text'`
)

// InstanceIDPath is where the boot script keeps the instance id.
const InstanceIDPath = "/etc/gantry/instance-id"

// Paths on the machine.
const (
	BinaryPath    = "/usr/local/bin/gantry"
	JoinTokenPath = "/etc/gantry/join-token"
	UnitPath      = "/etc/systemd/system/gantry-agent.service"
	InstallPath   = "/usr/local/lib/gantry/boot.sh"
	DataDir       = "/var/lib/gantry"
	// MarkerPrefix starts every boot progress line on the console.
	MarkerPrefix = "[gantry-boot] "
)

// Boot steps, in order, as markers.
var Steps = []string{"start", "download", "verify", "install", "start-agent", "done"}

var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

// Validate checks the agent settings, naming the bad field.
func (a Agent) Validate() error {
	if a.Runtime != "" && a.Runtime != "docker" && a.Runtime != "process" {
		return fmt.Errorf("agent.runtime: want docker or process, got %q", a.Runtime)
	}
	return nil
}

// ValidateBinaries checks where machines download the agent (the
// cluster's spec.agent.binaries), naming the bad field.
func ValidateBinaries(binaries map[string]api.AgentBinary) error {
	if len(binaries) == 0 {
		return errors.New("spec.agent.binaries: at least one architecture (amd64, arm64) is required: where machines download the gantry binary")
	}
	for arch, b := range binaries {
		if arch != "amd64" && arch != "arm64" {
			return fmt.Errorf("spec.agent.binaries.%s: unknown architecture (want amd64 or arm64)", arch)
		}
		if !strings.HasPrefix(b.URL, "https://") && !strings.HasPrefix(b.URL, "http://") {
			return fmt.Errorf("spec.agent.binaries.%s.url: want an http(s) URL, got %q", arch, b.URL)
		}
		if !sha256Hex.MatchString(b.SHA256) {
			return fmt.Errorf("spec.agent.binaries.%s.sha256: want 64 lowercase hex digits", arch)
		}
	}
	return nil
}

type file struct {
	Path        string `yaml:"path"`
	Permissions string `yaml:"permissions"`
	Owner       string `yaml:"owner"`
	Content     string `yaml:"content"`
}

type config struct {
	WriteFiles []file      `yaml:"write_files"`
	RunCmd     [][]string  `yaml:"runcmd"`
	Output     interface{} `yaml:"output,omitempty"`
}

// Render returns the machine's user data. The join token is in it: user
// data is readable on the machine (and by whoever may describe it in the
// cloud account), which is why join tokens expire and bind to one machine.
func Render(b provisioner.Bootstrap, a Agent, m Machine) (string, error) {
	if err := a.Validate(); err != nil {
		return "", err
	}
	if err := ValidateBinaries(b.AgentBinaries); err != nil {
		return "", err
	}
	if b.ServerURL == "" || b.Cluster == "" || b.MachineID == "" || b.JoinToken == "" {
		return "", errors.New("bootstrap: server URL, cluster, machine and join token are required")
	}
	cfg := config{
		WriteFiles: []file{
			{Path: JoinTokenPath, Permissions: "0600", Owner: "root:root", Content: b.JoinToken},
			{Path: UnitPath, Permissions: "0644", Owner: "root:root", Content: unit(b, a, m)},
			{Path: InstallPath, Permissions: "0755", Owner: "root:root", Content: bootScript(b.AgentBinaries, m.InstanceIDCommand)},
		},
		RunCmd: [][]string{{InstallPath}},
		// Boot output goes to the console too, where providers can read it.
		Output: map[string]string{"all": "| tee -a /var/log/cloud-init-output.log /dev/console"},
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return "", fmt.Errorf("render cloud-config: %w", err)
	}
	return "#cloud-config\n" + string(out), nil
}

// unit is the systemd unit of the agent, each argument quoted for systemd.
func unit(b provisioner.Bootstrap, a Agent, m Machine) string {
	runtime := a.Runtime
	if runtime == "" {
		runtime = "docker"
	}
	args := []string{BinaryPath, "agent", "--server", b.ServerURL, "--cluster", b.Cluster, "--group", b.Group,
		"--machine-id", b.MachineID, "--data-dir", DataDir, "--runtime", runtime, "--join-token-file", JoinTokenPath}
	if m.InstanceIDCommand != "" {
		args = append(args, "--provider-id-file", InstanceIDPath)
	}
	if runtime == "docker" {
		// Replica containers in host mode ask the agent for names at the
		// machine's address (they do not reach its loopback).
		args = append(args, "--container-dns", "auto")
	}
	if m.Zone != "" {
		args = append(args, "--zone", m.Zone)
	}
	if b.TemplateVersion != "" {
		args = append(args, "--template-version", b.TemplateVersion)
	}
	keys := make([]string, 0, len(m.Labels))
	for k := range m.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, "--label", k+"="+m.Labels[k])
	}
	args = append(args, a.ExtraArgs...)
	quoted := make([]string, len(args))
	for i, arg := range args {
		quoted[i] = systemdQuote(arg)
	}
	after := "network-online.target"
	if runtime == "docker" {
		after += " docker.service"
	}
	return fmt.Sprintf(`[Unit]
Description=Gantry agent
Wants=network-online.target
After=%s

[Service]
ExecStart=%s
Restart=always
RestartSec=5

[Install]
WantedBy=multi-user.target
`, after, strings.Join(quoted, " "))
}

// instanceIDStep writes the instance id the metadata service gives, if it
// answers (the agent joins without it otherwise).
func instanceIDStep(command string) string {
	if command == "" {
		return ""
	}
	return "(" + command + ") > " + InstanceIDPath + ".tmp 2>/dev/null && mv " + InstanceIDPath + ".tmp " + InstanceIDPath + " || rm -f " + InstanceIDPath + ".tmp\n"
}

// systemdQuote quotes one ExecStart argument: double quotes, with
// backslash, quote, and the specifier and variable characters escaped.
func systemdQuote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "%", "%%", "$", "$$", "\n", `\n`)
	return `"` + r.Replace(s) + `"`
}

// shellQuote makes a single-quoted POSIX shell word.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// bootScript downloads, verifies and installs the binary, then starts the
// agent, printing a marker before each step.
func bootScript(binaries map[string]api.AgentBinary, instanceIDCommand string) string {
	var sb strings.Builder
	sb.WriteString(`#!/bin/sh
set -eu
step() { echo "` + MarkerPrefix + `$1"; }
fail() { echo "` + MarkerPrefix + `failed: $1"; exit 1; }
step start
case "$(uname -m)" in
  x86_64|amd64) arch=amd64 ;;
  aarch64|arm64) arch=arm64 ;;
  *) fail "unsupported architecture $(uname -m)" ;;
esac
case "$arch" in
`)
	archs := make([]string, 0, len(binaries))
	for arch := range binaries {
		archs = append(archs, arch)
	}
	sort.Strings(archs)
	for _, arch := range archs {
		bin := binaries[arch]
		fmt.Fprintf(&sb, "  %s) url=%s; sum=%s ;;\n", arch, shellQuote(bin.URL), shellQuote(bin.SHA256))
	}
	sb.WriteString(`  *) fail "no gantry binary configured for $arch" ;;
esac
step download
tmp="` + BinaryPath + `.download"
if command -v curl >/dev/null; then
  curl -fsSL --retry 5 --retry-delay 2 -o "$tmp" "$url" || fail "download $url"
else
  wget -q -O "$tmp" "$url" || fail "download $url"
fi
step verify
echo "$sum  $tmp" | sha256sum -c - >/dev/null || fail "sha256 mismatch for $url"
step install
chmod 0755 "$tmp"
mv "$tmp" ` + BinaryPath + `
mkdir -p ` + DataDir + `
chmod 0700 ` + DataDir + `
` + instanceIDStep(instanceIDCommand) + `step start-agent
systemctl daemon-reload
systemctl enable --now gantry-agent.service || fail "systemctl start gantry-agent"
step done
`)
	return sb.String()
}

// LastMarker is the last boot step a console output shows ("" if none).
func LastMarker(console string) string {
	last := ""
	for _, line := range strings.Split(console, "\n") {
		if i := strings.Index(line, MarkerPrefix); i >= 0 {
			last = strings.TrimSpace(line[i+len(MarkerPrefix):])
		}
	}
	return last
}

// Tail is the last n lines of s.
func Tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// AgentConfigKeys are the spec.provider.config keys AgentFromConfig reads.
var AgentConfigKeys = []string{"agentRuntime"}

// AgentFromConfig reads how machines run the agent from a cluster's
// spec.provider.config (cloud providers share these keys).
func AgentFromConfig(cfg map[string]string) (Agent, error) {
	a := Agent{Runtime: cfg["agentRuntime"]}
	if a.Validate() != nil {
		return a, fmt.Errorf("spec.provider.config.agentRuntime: want docker or process, got %q", a.Runtime)
	}
	return a, nil
}
