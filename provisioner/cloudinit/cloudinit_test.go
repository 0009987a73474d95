package cloudinit

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/provisioner"
	"go.yaml.in/yaml/v3"
)

func testAgent() Agent { return Agent{} }

func testBinaries() map[string]api.AgentBinary {
	return map[string]api.AgentBinary{
		"amd64": {URL: "https://downloads.example.com/gantry/v1.2.3/gantry-linux-amd64", SHA256: strings.Repeat("a", 64)},
		"arm64": {URL: "https://downloads.example.com/gantry/v1.2.3/gantry-linux-arm64", SHA256: strings.Repeat("b", 64)},
	}
}

func testBootstrap() provisioner.Bootstrap {
	return provisioner.Bootstrap{ServerURL: "https://gantry.internal:7400", Cluster: "prod", Group: "general", MachineID: "prod-general-1a2b3",
		JoinToken: "gjt1.token-value", TemplateVersion: "v1.2.3", AgentBinaries: testBinaries()}
}

func TestRenderMatchesGolden(t *testing.T) {
	out, err := Render(testBootstrap(), testAgent(), Machine{Zone: "us-east-1a", Labels: map[string]string{"tier": "web"}})
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "cloud-config.golden")
	if os.Getenv("GANTRY_UPDATE_GOLDEN") != "" {
		if err := os.WriteFile(golden, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, `"--template-version" "v1.2.3"`) {
		t.Error("the cluster's agent.version does not reach the agent")
	}
	if out != string(want) {
		t.Fatalf("rendered cloud-config differs from %s (GANTRY_UPDATE_GOLDEN=1 to accept):\n%s", golden, out)
	}
}

func TestRenderIsValidCloudConfig(t *testing.T) {
	out, err := Render(testBootstrap(), testAgent(), Machine{Zone: "us-east-1a"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "#cloud-config\n") {
		t.Fatal("user data must start with #cloud-config")
	}
	var doc struct {
		WriteFiles []struct{ Path, Permissions, Content string } `yaml:"write_files"`
		RunCmd     [][]string                                    `yaml:"runcmd"`
	}
	if err := yaml.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("not YAML: %v", err)
	}
	files := map[string]string{}
	for _, f := range doc.WriteFiles {
		files[f.Path] = f.Permissions
		if f.Path == JoinTokenPath && f.Content != "gjt1.token-value" {
			t.Errorf("join token file content %q", f.Content)
		}
	}
	if files[JoinTokenPath] != "0600" || files[UnitPath] == "" || files[InstallPath] != "0755" {
		t.Errorf("write_files %v", files)
	}
	if len(doc.RunCmd) != 1 || doc.RunCmd[0][0] != InstallPath {
		t.Errorf("runcmd %v", doc.RunCmd)
	}
}

// The boot script is valid shell, and hostile values stay data: a URL
// with quotes and $(...) is neither executed nor breaks the script.
func TestBootScriptQuotesValues(t *testing.T) {
	binaries := testBinaries()
	binaries["amd64"] = api.AgentBinary{URL: "https://x.example.com/a'b$(touch /tmp/pwned)\"c", SHA256: strings.Repeat("c", 64)}
	script := bootScript(binaries, "")
	if err := exec.Command("sh", "-n", "-c", script).Run(); err != nil {
		t.Fatalf("boot script is not valid sh: %v\n%s", err, script)
	}
	if !strings.Contains(script, `url='https://x.example.com/a'\''b$(touch /tmp/pwned)"c'`) {
		t.Errorf("URL not single-quoted:\n%s", script)
	}
	u := unit(provisioner.Bootstrap{ServerURL: "http://s", Cluster: "c", MachineID: "m"}, Agent{}, Machine{Labels: map[string]string{"k": `v "$HOME" 100%`}})
	if !strings.Contains(u, `"--label" "k=v \"$$HOME\" 100%%"`) {
		t.Errorf("systemd quoting:\n%s", u)
	}
}

func TestValidateNamesTheField(t *testing.T) {
	for want, binaries := range map[string]map[string]api.AgentBinary{
		"spec.agent.binaries: at least one": {},
		"spec.agent.binaries.sparc":         {"sparc": {URL: "https://x", SHA256: strings.Repeat("a", 64)}},
		"spec.agent.binaries.amd64.url":     {"amd64": {URL: "ftp://x", SHA256: strings.Repeat("a", 64)}},
		"spec.agent.binaries.amd64.sha256":  {"amd64": {URL: "https://x", SHA256: "abc"}},
	} {
		b := testBootstrap()
		b.AgentBinaries = binaries
		if _, err := Render(b, testAgent(), Machine{}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want %q, got %v", want, err)
		}
	}
	if err := (Agent{Runtime: "lxc"}).Validate(); err == nil || !strings.Contains(err.Error(), "agent.runtime: want docker or") {
		t.Errorf("runtime: %v", err)
	}
	if _, err := Render(provisioner.Bootstrap{}, testAgent(), Machine{}); err == nil {
		t.Error("render without a bootstrap succeeded")
	}
}

func TestLastMarkerAndTail(t *testing.T) {
	console := "[    0.0] kernel\ncloud-init[123]: [gantry-boot] start\ncloud-init[123]: [gantry-boot] download\ncurl: (6) Could not resolve host\ncloud-init[123]: [gantry-boot] failed: download https://x\n"
	if got := LastMarker(console); got != "failed: download https://x" {
		t.Errorf("last marker %q", got)
	}
	if got := LastMarker("no markers"); got != "" {
		t.Errorf("no markers: %q", got)
	}
	if got := Tail(console, 2); got != "curl: (6) Could not resolve host\ncloud-init[123]: [gantry-boot] failed: download https://x" {
		t.Errorf("tail %q", got)
	}
}

// On a cloud, the boot script asks the metadata service for the instance
// id (as each provider names instances) and the agent reads it, so it
// reports its instance at join; the script stays valid shell whether the
// service answers or not.
func TestInstanceIDFromTheCloudsMetadata(t *testing.T) {
	for name, command := range map[string]string{"aws": AWSInstanceID, "gcp": GCPInstanceID, "azure": AzureInstanceID} {
		out, err := Render(testBootstrap(), testAgent(), Machine{Zone: "z", InstanceIDCommand: command})
		if err != nil {
			t.Fatal(err)
		}
		script := bootScript(testBinaries(), command)
		if err := exec.Command("sh", "-n", "-c", script).Run(); err != nil {
			t.Fatalf("%s: boot script is not valid sh: %v", name, err)
		}
		if !strings.Contains(script, InstanceIDPath) || !strings.Contains(out, `"--provider-id-file" "`+InstanceIDPath+`"`) {
			t.Fatalf("%s: the instance id does not reach the agent:\n%s", name, out)
		}
	}
	if out, _ := Render(testBootstrap(), testAgent(), Machine{}); strings.Contains(out, "--provider-id-file") {
		t.Fatal("without a metadata command the agent is told of a file nobody writes")
	}
}
