package agent

import (
	"slices"
	"testing"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/runtime"
)

// What the server assigned (exact GPU devices, runtime class, resources)
// reaches the runtime driver unchanged.
func TestRuntimeSpecCarriesDevicesRuntimeClassAndLimits(t *testing.T) {
	a := &Agent{machineID: "m1"}
	s := &supervisor{agent: a, assignment: api.Assignment{
		ReplicaID: "train-0", Service: "train", SpecHash: "h",
		Spec:     api.ServiceSpec{Image: "trainer:1", Ports: []api.Port{{Name: "http", ContainerPort: 8080}}, StopTimeoutSeconds: 9},
		Requests: api.Resources{MilliCPU: 1500, MemoryBytes: 2 << 30, EphemeralBytes: 5 << 30, GPUs: 2},
		GPUs:     []api.GPUDevice{{Index: 2, UUID: "GPU-aaaa"}, {Index: 3}}, RuntimeClass: runtime.RuntimeClassTEE,
	}}
	sp := s.runtimeSpec()
	if !slices.Equal(sp.GPUDeviceIDs, []string{"GPU-aaaa", "3"}) {
		t.Errorf("GPU devices %v: want the UUID where known, else the index", sp.GPUDeviceIDs)
	}
	if sp.RuntimeClass != runtime.RuntimeClassTEE || sp.MachineID != "m1" || sp.Image != "trainer:1" {
		t.Errorf("spec %+v", sp)
	}
	if sp.MilliCPU != 1500 || sp.MemoryBytes != 2<<30 || sp.EphemeralBytes != 5<<30 || sp.ContainerPort["http"] != 8080 || sp.StopTimeout.Seconds() != 9 {
		t.Errorf("limits/ports %+v", sp)
	}
}

// Where the driver gives files, secret values are files unless the spec
// asks for env; elsewhere they are env.
func TestSecretsAsFilesOrEnv(t *testing.T) {
	refs := map[string]api.SecretKeyRef{"A": {Name: "s", Key: "a"}, "B": {Name: "s", Key: "b", As: api.SecretAsEnv}}
	secrets := map[string]string{"A": "va", "B": "vb"}
	env, files := withSecrets(map[string]string{"PLAIN": "p"}, refs, secrets, true)
	if env["A"] != "" || env["B"] != "vb" || env["PLAIN"] != "p" || files["A"] != "va" || len(files) != 1 {
		t.Fatalf("with files: env %v files %v", env, files)
	}
	env, files = withSecrets(nil, refs, secrets, false)
	if env["A"] != "va" || env["B"] != "vb" || files != nil {
		t.Fatalf("without files: env %v files %v", env, files)
	}
}
