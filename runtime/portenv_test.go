package runtime

import "testing"

// PORT is the first port the spec declares, not the first by name.
func TestPortEnvNamesTheMainPort(t *testing.T) {
	ports := map[string]int{"admin": 9000, "http": 8080, "http-alt": 8081}
	env := PortEnv(Spec{MainPort: "http"}, ports)
	if env["PORT"] != "8080" || env["GANTRY_PORT_ADMIN"] != "9000" || env["GANTRY_PORT_HTTP_ALT"] != "8081" {
		t.Fatalf("env: %v", env)
	}
	if env := PortEnv(Spec{}, ports); env["PORT"] != "9000" {
		t.Fatalf("without a main port, PORT is the first by name: %v", env)
	}
	if env := PortEnv(Spec{MainPort: "http"}, nil); len(env) != 0 {
		t.Fatalf("no ports, no env: %v", env)
	}
}
