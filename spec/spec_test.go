package spec

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/provisioner"
)

const baseCluster = `kind: Cluster
metadata: {name: dev}
spec:
  capacityGroups:
    - {groupId: general, instanceType: t.small, minSize: 1, maxSize: 3}
`

func kubeCluster(config string) string {
	return "kind: Cluster\nmetadata: {name: k8s}\nspec:\n  provider: {name: kubernetes, config: " + config + "}\n"
}

const baseService = `kind: Service
metadata: {name: web}
spec:
  cluster: dev
  command: [server]
  ports: [{name: http}]
  resources: {cpu: 500m, memory: 256Mi}
`

// providers knows local (a catalog, its own binary), aws (downloads the
// agent) and exec (may).
type providers struct{}

var testCatalogs providers

func (providers) Names() []string { return []string{"aws", "exec", "local"} }
func (providers) Catalog(p api.ProviderSpec) ([]provisioner.InstanceType, bool) {
	if p.Name != "local" {
		return nil, false
	}
	return []provisioner.InstanceType{{Name: "t.small", MilliCPU: 2000, MemoryBytes: 4 << 30}}, true
}
func (providers) RequiresAgentBinaries(name string) bool { return name == "aws" }
func (providers) AcceptsAgentBinaries(name string) bool  { return name == "aws" || name == "exec" }
func (providers) Runtimes(name string) []string {
	return map[string][]string{"local": {"process"}, "aws": {"docker"}, "exec": {"docker"}}[name]
}
func (providers) Routes(p api.ProviderSpec) error {
	if p.Name == "local" {
		return nil
	}
	return fmt.Errorf("provider %s does not route each machine's /24 to it", p.Name)
}

func TestParseValidFile(t *testing.T) {
	data, err := os.ReadFile("../examples/hello.yaml")
	if err != nil {
		t.Fatal(err)
	}
	docs, err := Parse("hello.yaml", data, nil)
	if err != nil {
		t.Fatalf("example must parse: %v", err)
	}
	if len(docs) != 2 || docs[0].Kind() != api.KindCluster || docs[1].Kind() != api.KindService {
		t.Fatalf("got %+v", docs)
	}
	svc := docs[1].Service
	if svc.Spec.DesiredReplicas() != 3 || svc.Spec.HealthCheck.HTTP.Path != "/healthz" {
		t.Fatalf("service decoded wrong: %+v", svc.Spec)
	}
	if docs[0].Cluster.Spec.ContainerCIDR != DefaultContainerCIDR {
		t.Fatalf("default CIDR not applied: %q", docs[0].Cluster.Spec.ContainerCIDR)
	}
}

func TestParseJSON(t *testing.T) {
	in := `{"kind":"Service","metadata":{"name":"web"},"spec":{"cluster":"dev","image":"nginx","replicas":2}}`
	docs, err := Parse("web.json", []byte(in), nil)
	if err != nil {
		t.Fatal(err)
	}
	if docs[0].Service.Spec.DesiredReplicas() != 2 || docs[0].Service.Spec.Image != "nginx" {
		t.Fatalf("got %+v", docs[0].Service.Spec)
	}
}

// Each case edits the base file and names the error it must produce:
// the document index and the field path must both be in the message.
func TestParseRejects(t *testing.T) {
	cases := []struct {
		name    string
		file    string
		wantDoc int
		want    string
	}{
		{"unknown top-level field", baseCluster + "extra: 1\n", 1, "extra: unknown field"},
		{"typo offers the field", strings.Replace(baseService, "cluster: dev", "cluster: dev\n  replcas: 2", 1), 1, `spec.replcas: unknown field (did you mean "replicas"?)`},
		{"typo of a kind", "kind: Servce\nmetadata: {name: x}\n", 1, `kind: unknown kind "Servce" (did you mean "Service"?)`},
		{"memory without a unit", strings.Replace(baseService, "memory: 256Mi", "memory: 512", 1), 1, "spec.resources.memory: 512 is 512 bytes (a number without a unit counts bytes): did you mean 512Mi?"},
		{"memory in MB", strings.Replace(baseService, "memory: 256Mi", "memory: 512MB", 1), 1, `spec.resources.memory: invalid byte quantity "512MB": want a number with an optional unit (Ki, Mi, Gi, Ti, k, M, G, T) (did you mean 512Mi or 512M?)`},
		{"cpu as millicores without m", baseCluster + "---\n" + strings.Replace(baseService, "cpu: 500m", "cpu: 500", 1), 2, "(cpu 500 is 500 CPUs: did you mean 500m?)"},
		{"GPU nobody has", baseCluster + "---\n" + strings.Replace(baseService, "memory: 256Mi}", "memory: 256Mi, gpu: {count: 1, type: a100, policy: required}}", 1), 2,
			`spec.resources.gpu: no machine of cluster "dev" has 1 GPU(s) of type a100: its capacity groups offer no GPUs`},
		{"image on a cluster of processes", baseCluster + "---\n" + strings.Replace(strings.Replace(baseService, "command: [server]", "image: web:1", 1), "{name: http}", "{name: http, containerPort: 80}", 1), 2,
			`spec.image: cluster "dev" runs no containers: its machines (provider local) offer only the process runtime; give spec.command instead`},
		{"unknown nested field", strings.Replace(baseCluster, "minSize: 1,", "minSize: 1, colour: red,", 1), 1, "spec.capacityGroups[0].colour: unknown field"},
		{"wrong type int", strings.Replace(baseCluster, "minSize: 1", "minSize: one", 1), 1, `spec.capacityGroups[0].minSize: expected an integer, got string "one"`},
		{"wrong type list", strings.Replace(baseService, "command: [server]", "command: server", 1), 1, "spec.command: expected a list"},
		{"bool as string", strings.Replace(baseService, "cluster: dev", "cluster: true", 1), 1, "spec.cluster: expected a string, got boolean true"},
		{"bad cpu", strings.Replace(baseService, "cpu: 500m", "cpu: lots", 1), 1, `spec.resources.cpu: invalid cpu quantity "lots"`},
		{"bad memory", strings.Replace(baseService, "memory: 256Mi", "memory: 12XB", 1), 1, `spec.resources.memory: invalid byte quantity "12XB"`},
		{"min greater than max", strings.Replace(baseCluster, "minSize: 1, maxSize: 3", "minSize: 5, maxSize: 3", 1), 1, "spec.capacityGroups[0].minSize: minSize 5 is greater than maxSize 3"},
		{"max zero", strings.Replace(baseCluster, "maxSize: 3", "maxSize: 0", 1), 1, "spec.capacityGroups[0].maxSize: must be between 1 and 10000"},
		{"env over the limit", strings.Replace(baseService, "command: [server]", "command: [server]\n  env: {BIG: "+strings.Repeat("x", 70000)+"}", 1), 1, "spec.env: holds 70003 bytes, over the limit of 65536"},
		{"group over the limit", strings.Replace(strings.Replace(baseCluster, "maxSize: 3", "maxSize: 10001", 1), "capacityGroups:", "containerCidr: 10.0.0.0/8\n  capacityGroups:", 1), 1, "(the limit of machines per group), got 10001"},
		{"bad groupId", strings.Replace(baseCluster, "groupId: general", "groupId: General_1", 1), 1, `spec.capacityGroups[0].groupId: "General_1" is not a valid groupId`},
		{"duplicate groupId", strings.Replace(baseCluster, "    - {groupId: general", "    - {groupId: general, maxSize: 1}\n    - {groupId: general", 1), 1, `spec.capacityGroups[1].groupId: duplicate groupId "general"`},
		{"malformed CIDR", baseCluster + "  containerCidr: 10.0.0/8\n", 1, `spec.containerCidr: "10.0.0/8" is not a CIDR`},
		{"too small CIDR", baseCluster + "  containerCidr: 10.0.0.0/25\n", 1, "spec.containerCidr: \"10.0.0.0/25\" is too small"},
		{"CIDR fewer subnets than machines", baseCluster + "  containerCidr: 10.0.0.0/23\n", 1, "holds 2 /24 subnets, fewer than the 3 machines"},
		{"routed mode where the provider does not route", strings.Replace(baseCluster, "spec:\n", "spec:\n  provider: {name: exec}\n", 1) + "  network: {mode: routed}\n", 1,
			"spec.network.mode: routed: provider exec does not route each machine's /24 to it; use overlay"},
		{"unknown network mode", baseCluster + "  network: {mode: mesh}\n", 1, `spec.network.mode: unknown mode "mesh"`},
		{"edge group without a machine", strings.Replace(baseCluster, "minSize: 1, maxSize: 3", "minSize: 0, maxSize: 3, role: edge", 1), 1, "an edge group keeps at least 1 machine"},
		{"CIDR host bits", baseCluster + "  containerCidr: 10.244.1.0/16\n", 1, "has host bits set (did you mean 10.244.0.0/16?)"},
		{"unknown capacity type", strings.Replace(baseCluster, "maxSize: 3", "maxSize: 3, capacityType: cheap", 1), 1, `capacityType: unknown capacity type "cheap"`},
		{"unknown instance type", strings.Replace(baseCluster, "t.small", "t.huge", 1), 1, `spec.capacityGroups[0].instanceType: unknown instance type "t.huge"`},
		{"unknown provider", strings.Replace(baseCluster, "spec:\n", "spec:\n  provider: {name: moon}\n", 1), 1, `spec.provider.name: unknown provider "moon"`},
		{"kubernetes has no capacity groups", strings.Replace(baseCluster, "spec:\n", "spec:\n  provider: {name: kubernetes}\n", 1), 1, `spec.capacityGroups: a kubernetes cluster has no capacity groups`},
		{"kubernetes namespace", kubeCluster("{namespace: Bad_NS}"), 1, `spec.provider.config.namespace: "Bad_NS" is not a namespace name`},
		{"kubernetes unknown setting", kubeCluster("{namespaces: apps}"), 1, `spec.provider.config.namespaces: unknown setting`},
		{"kubernetes GPU weight", kubeCluster("{gpuPreferredWeight: \"200\"}"), 1, `spec.provider.config.gpuPreferredWeight: "200" is not a weight from 1 to 100`},
		{"kubernetes label key", kubeCluster("{gpuProductLabel: \"a b\"}"), 1, `spec.provider.config.gpuProductLabel: "a b" is not a label key`},
		{"kubernetes machine template", kubeCluster("{}") + "  systemReserved: {cpu: 100m}\n", 1, `spec.systemReserved: not used by a kubernetes cluster`},
		{"binaries required", strings.Replace(baseCluster, "spec:\n", "spec:\n  provider: {name: aws}\n", 1), 1, "spec.agent.binaries: required for provider aws"},
		{"binaries reach no machine", strings.Replace(baseCluster, "spec:\n", "spec:\n  agent: {binaries: {amd64: {url: \"https://x.example.com/g\", sha256: "+strings.Repeat("a", 64)+"}}}\n", 1), 1, "spec.agent.binaries: provider local runs the server's own gantry binary"},
		{"bad binary", strings.Replace(baseCluster, "spec:\n", "spec:\n  provider: {name: aws}\n  agent: {binaries: {sparc: {url: \"ftp://x\", sha256: abc}}}\n", 1), 1, "spec.agent.binaries.sparc: unknown architecture"},
		{"bad name", strings.Replace(baseCluster, "name: dev", "name: Dev_1", 1), 1, `metadata.name: "Dev_1" is not a valid name`},
		{"missing name", strings.Replace(baseCluster, "metadata: {name: dev}", "metadata: {}", 1), 1, "metadata.name: required"},
		{"missing kind", "metadata: {name: x}\nspec: {}\n", 1, "kind: required"},
		{"unknown kind", "kind: Pod\nmetadata: {name: x}\n", 1, `kind: unknown kind "Pod"`},
		{"wrong apiVersion", "apiVersion: v9\n" + baseCluster, 1, `apiVersion: unsupported apiVersion "v9"`},
		{"replica larger than any machine", baseCluster + "---\n" + strings.Replace(baseService, "cpu: 500m", "cpu: \"100\"", 1), 2, `spec.resources.cpu: one replica asks more than any machine of cluster "dev" can give: the largest machine its capacity groups can launch (t.small in group general) offers cpu 2, memory 4Gi after systemReserved`},
		{"replica larger after systemReserved", strings.Replace(baseCluster, "capacityGroups:", "systemReserved: {memory: 3900Mi}\n  capacityGroups:", 1) + "---\n" + baseService, 2, `spec.resources.memory: one replica asks more than any machine of cluster "dev" can give`},
		{"systemReserved leaves nothing", strings.Replace(baseCluster, "capacityGroups:", "systemReserved: {cpu: \"2\"}\n  capacityGroups:", 1), 1, `spec.systemReserved: leaves the machines of group "general" (t.small) no CPU or memory`},
		{"NUL in env", baseService + "  env: {A: \"x\\0y\"}\n", 1, "spec.env.A: contains a NUL byte"},
		{"NUL in command", strings.Replace(baseService, "command: [server]", "command: [\"ser\\0ver\"]", 1), 1, "spec.command[0]: contains a NUL byte"},
		{"NUL in args", baseService + "  args: [ok, \"a\\0\"]\n", 1, "spec.args[1]: contains a NUL byte"},
		{"update that cannot replace", baseService + "  update: {maxSurge: 0, maxUnavailable: 0}\n", 1, "spec.update.maxUnavailable: maxSurge and maxUnavailable cannot both be 0"},
		{"autoPromote without canary", baseService + "  update: {autoPromote: true}\n", 1, "spec.update.autoPromote: needs canary replicas"},
		{"negative surge", baseService + "  update: {maxSurge: -1}\n", 1, "spec.update.maxSurge: must be 0 or more"},
		{"deadline within minHealthy", baseService + "  update: {minHealthySeconds: 30, progressDeadlineSeconds: 20}\n", 1, "spec.update.progressDeadlineSeconds: must be greater than minHealthySeconds (30)"},
		{"negative drain", baseService + "  update: {drainSeconds: -1}\n", 1, "spec.update.drainSeconds: must be 0 or more, got -1"},
		{"duplicate name", baseCluster + "---\n" + baseCluster, 2, `metadata.name: duplicate Cluster "dev" (first in document 1)`},
		{"error in second document", baseCluster + "---\n" + strings.Replace(baseService, "replicas", "replicas", 1) + "  replicas: -1\n", 2, "spec.replicas: must be between 0 and 10000"},
		{"image or command", strings.Replace(baseService, "command: [server]", "args: [x]", 1), 1, "spec: one of image or command is required"},
		{"reserved env", baseService + "  env: {PORT: \"1\"}\n", 1, "spec.env.PORT: reserved"},
		{"bad env name", baseService + "  env: {\"1X\": a}\n", 1, "spec.env.1X: invalid environment variable name"},
		{"duplicate port", strings.Replace(baseService, "ports: [{name: http}]", "ports: [{name: http}, {name: http}]", 1), 1, `spec.ports[1].name: duplicate port name "http"`},
		{"bad port number", strings.Replace(baseService, "{name: http}", "{name: http, containerPort: 70000}", 1), 1, "spec.ports[0].containerPort: must be between 1 and 65535"},
		{"image without container port", strings.Replace(baseService, "command: [server]", "image: web:1", 1), 1, "spec.ports[0].containerPort: required for a service with an image"},
		{"health check undeclared port", baseService + "  healthCheck: {http: {port: admin}}\n", 1, `spec.healthCheck.http.port: port "admin" is not declared`},
		{"health check two kinds", baseService + "  healthCheck: {http: {port: http}, tcp: {port: http}}\n", 1, "spec.healthCheck: exactly one of http, tcp or exec"},
		{"bad isolation", baseService + "  isolation: secret\n", 1, `spec.isolation: unknown isolation "secret"`},
		{"bad gpu policy", baseService + "  resources: {gpu: {count: 1, policy: maybe}}\n", 1, ""},
		{"bad spread key", baseService + "  placement: {spread: [{key: rack, maxSkew: 1}]}\n", 1, `spec.placement.spread[0].key: unknown spread key "rack"`},
		{"affinity without selector", baseService + "  placement: {affinity: [{topology: zone}]}\n", 1, "spec.placement.affinity[0].selector: required"},
		{"affinity bad selector", baseService + "  placement: {antiAffinity: [{selector: {\"a b\": x}, topology: machine}]}\n", 1, "spec.placement.antiAffinity[0].selector"},
		{"affinity bad topology", baseService + "  placement: {antiAffinity: [{selector: {app: db}, topology: rack}]}\n", 1, `spec.placement.antiAffinity[0].topology: must be machine or zone, got "rack"`},
		{"affinity bad mode", baseService + "  placement: {affinity: [{selector: {app: db}, topology: zone, mode: always}]}\n", 1, `spec.placement.affinity[0].mode: must be required or preferred, got "always"`},
		{"preferred affinity without weight", baseService + "  placement: {affinity: [{selector: {app: db}, topology: zone, mode: preferred}]}\n", 1, "spec.placement.affinity[0].weight: a preferred term needs a weight from 1 to"},
		{"required affinity with weight", baseService + "  placement: {antiAffinity: [{selector: {app: db}, topology: machine, weight: 5}]}\n", 1, "spec.placement.antiAffinity[0].weight: only preferred terms have a weight"},
		{"pinned group missing in cluster", baseCluster + "---\n" + baseService + "  placement: {capacityGroups: [gpu]}\n", 2, `spec.placement.capacityGroups[0]: cluster "dev" has no capacity group "gpu"`},
		{"not YAML", "kind: [unclosed\n", 1, "not valid YAML or JSON"},
		{"not an object", "- a\n- b\n", 1, "expected an object with kind, metadata and spec"},
		{"duplicate key", "kind: Cluster\nkind: Service\n", 1, "already defined"},
		{"empty file", "", 0, "no resources found"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("f.yaml", []byte(tc.file), testCatalogs)
			if err == nil {
				t.Fatalf("accepted:\n%s", tc.file)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "f.yaml: ") {
				t.Errorf("error does not name the file: %s", msg)
			}
			if tc.wantDoc > 0 && !strings.Contains(msg, "document "+strconv.Itoa(tc.wantDoc)+": ") {
				t.Errorf("error does not name document %d: %s", tc.wantDoc, msg)
			}
			if !strings.Contains(msg, tc.want) {
				t.Errorf("error %q does not contain %q", msg, tc.want)
			}
		})
	}
}

// What `gantry get -o yaml` prints (status, generation, times) applies
// as it is: the server's fields are ignored.
func TestServerFieldsAreIgnoredOnInput(t *testing.T) {
	src := strings.Replace(baseService, "metadata: {name: web}", "metadata: {name: web, generation: 7, createdAt: \"2026-01-01T00:00:00Z\"}", 1) +
		"status: {desired: 3, running: 2, pending: 1}\n"
	docs, err := Parse("f.yaml", []byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	if docs[0].Service.Status != nil {
		t.Fatalf("status kept: %+v", docs[0].Service.Status)
	}
}

func TestErrorListIsFieldErrors(t *testing.T) {
	_, err := Parse("f.yaml", []byte(strings.Replace(baseCluster, "minSize: 1", "minSize: x", 1)), nil)
	var list ErrorList
	if !errors.As(err, &list) || len(list) != 1 {
		t.Fatalf("want one field error, got %v", err)
	}
	if fe := list[0]; fe.Path != "spec.capacityGroups[0].minSize" || fe.Document != 1 || fe.File != "f.yaml" {
		t.Fatalf("got %+v", fe)
	}
}

func mustCluster(t *testing.T, src string) *api.Cluster {
	t.Helper()
	docs, err := Parse("c.yaml", []byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	return docs[0].Cluster
}

func TestClusterUpdateRules(t *testing.T) {
	old := mustCluster(t, baseCluster)
	cases := []struct {
		name string
		edit func(c *api.Cluster)
		want string
	}{
		{"rename", func(c *api.Cluster) { c.Metadata.Name = "other" }, "metadata.name: cluster name is immutable"},
		{"cidr change", func(c *api.Cluster) { c.Spec.ContainerCIDR = "10.1.0.0/16" }, "spec.containerCidr: immutable once set"},
		{"instance type change", func(c *api.Cluster) { c.Spec.CapacityGroups[0].InstanceType = "t.large" }, `the instance type of existing group "general" is immutable`},
		{"allowed: resize and add group", func(c *api.Cluster) {
			c.Spec.CapacityGroups[0].MaxSize = 9
			c.Spec.CapacityGroups = append(c.Spec.CapacityGroups, api.CapacityGroup{GroupID: "gpu", InstanceType: "t.large", MaxSize: 1})
		}, ""},
		{"allowed: remove group", func(c *api.Cluster) { c.Spec.CapacityGroups = nil }, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			updated := mustCluster(t, baseCluster)
			tc.edit(updated)
			errs := CheckClusterUpdate(old, updated)
			if tc.want == "" {
				if errs != nil {
					t.Fatalf("rejected: %v", errs)
				}
				return
			}
			if errs == nil || !strings.Contains(errs.Error(), tc.want) {
				t.Fatalf("got %v, want %q", errs, tc.want)
			}
		})
	}
}

func TestChanges(t *testing.T) {
	old := mustCluster(t, baseCluster)
	updated := mustCluster(t, strings.Replace(baseCluster, "maxSize: 3", "maxSize: 5", 1))
	got := Changes(old, updated)
	if len(got) != 1 || got[0] != "spec.capacityGroups: "+short(toAny(old.Spec.CapacityGroups))+" → "+short(toAny(updated.Spec.CapacityGroups)) {
		t.Fatalf("got %q", got)
	}
	if c := Changes(old, mustCluster(t, baseCluster)); len(c) != 0 {
		t.Fatalf("identical specs differ: %q", c)
	}
}

func toAny(v any) any {
	var out any
	mustRoundTrip(v, &out)
	return out
}

func TestQuantities(t *testing.T) {
	cpu := map[string]int64{"500m": 500, "2": 2000, "0.25": 250, "1.5": 1500, "100m": 100}
	for in, want := range cpu {
		if got, err := api.ParseCPU(in); err != nil || got != want {
			t.Errorf("ParseCPU(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	mem := map[string]int64{"512Mi": 512 << 20, "1Gi": 1 << 30, "1G": 1e9, "1024": 1024, "1.5Gi": 3 << 29, "10k": 10000}
	for in, want := range mem {
		if got, err := api.ParseBytes(in); err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"lots", "-1", "1e3", "0x10", "1.2.3", "m", "0.0001"} {
		if _, err := api.ParseCPU(bad); err == nil {
			t.Errorf("ParseCPU(%q) accepted", bad)
		}
	}
	for _, bad := range []string{"12XB", "-1Mi", "Mi", "1.5", "1e9", " "} {
		if _, err := api.ParseBytes(bad); err == nil {
			t.Errorf("ParseBytes(%q) accepted", bad)
		}
	}
}
