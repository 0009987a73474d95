package agent

import "testing"

// Where the other machines send this one's WireGuard traffic: the address
// it is told, else the one it reaches the server from (a docker machine
// container told its host's address, a cloud machine told none).
func TestMeshEndpointAddress(t *testing.T) {
	for name, c := range map[string]struct{ mesh, address, want string }{
		"told the mesh address":    {"10.0.0.7", "192.0.2.1", "10.0.0.7"},
		"told its address":         {"", "10.0.0.8", "10.0.0.8"},
		"auto":                     {MeshAddressAuto, "192.0.2.1", "127.0.0.1"},
		"told neither (the cloud)": {"", "", "127.0.0.1"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.MeshAddress, cfg.Address, cfg.ServerURL = c.mesh, c.address, "https://127.0.0.1:7400,https://127.0.0.2:7400"
			got, err := (&Agent{cfg: cfg}).meshEndpointAddress()
			if err != nil || got != c.want {
				t.Fatalf("%q, %v; want %q", got, err, c.want)
			}
		})
	}
}
