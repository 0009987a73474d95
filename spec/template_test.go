package spec

import (
	"strings"
	"testing"
)

const templated = baseCluster + `  agent: {version: "1.0", apiUrl: "https://gantry.example.com"}
  monitoring:
    otlpLogsEndpoint: https://otel.example.com/v1/logs
    headers: [{name: Authorization, secretRef: {env: OTLP_TOKEN}}]
`

func env(vals map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vals[k]; return v, ok }
}

func TestTemplateHash(t *testing.T) {
	hash := func(src string, secret string) string {
		c := mustCluster(t, src)
		if errs := ResolveSecrets(c, env(map[string]string{"OTLP_TOKEN": secret})); errs != nil {
			t.Fatal(errs)
		}
		return TemplateHash(c, "general")
	}
	base := hash(templated, "s1")
	if hash(templated, "s1") != base {
		t.Fatal("hash is not stable")
	}
	if hash(strings.Replace(templated, `version: "1.0"`, `version: "1.1"`, 1), "s1") == base {
		t.Error("agent version change not detected")
	}
	if hash(templated, "s2") == base {
		t.Error("rotated secret not detected")
	}
	if hash(strings.Replace(templated, "maxSize: 3", "maxSize: 9", 1), "s1") != base {
		t.Error("a size change must not roll machines")
	}
	withMode := func(mode string) string {
		return hash(strings.Replace(templated, "spec:\n", "spec:\n  network: {mode: "+mode+"}\n", 1), "s1")
	}
	if withMode("host") != base {
		t.Error("network mode host (the default) changed the hash of machines launched before it")
	}
	if withMode("overlay") == base {
		t.Error("a change of network mode must roll machines")
	}
}

func TestResolveSecretsKeepsOnlyTheHash(t *testing.T) {
	c := mustCluster(t, templated)
	if errs := ResolveSecrets(c, env(map[string]string{"OTLP_TOKEN": "very-secret"})); errs != nil {
		t.Fatal(errs)
	}
	h := c.Spec.Monitoring.Headers[0]
	if len(h.ValueSHA256) != 64 || strings.Contains(h.ValueSHA256, "very-secret") {
		t.Fatalf("header %+v", h)
	}
	c = mustCluster(t, templated)
	errs := ResolveSecrets(c, env(nil))
	if errs == nil || !strings.Contains(errs.Error(), "spec.monitoring.headers[0].secretRef.env: environment variable OTLP_TOKEN is not set") {
		t.Fatalf("missing secret: %v", errs)
	}
}

func TestTemplateValidation(t *testing.T) {
	cases := map[string]string{
		"bad url":         strings.Replace(templated, "https://gantry.example.com", "gantry", 1),
		"secret inline":   strings.Replace(templated, "{env: OTLP_TOKEN}", "{}", 1),
		"bad binary hash": strings.Replace(templated, `apiUrl:`, `binarySha256: "xyz", apiUrl:`, 1),
		"zero surge":      templated + "  rollout: {maxSurge: -1}\n",
	}
	for name, src := range cases {
		if _, err := Parse("c.yaml", []byte(src), nil); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
