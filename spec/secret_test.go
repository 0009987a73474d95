package spec

import (
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/api"
)

const secretFile = `kind: Secret
metadata: {name: db}
spec:
  keys:
    password: {env: DB_PASSWORD}
    ca.pem: {file: /etc/db/ca.pem}
---
kind: Service
metadata: {name: api}
spec:
  cluster: dev
  command: [sleep, "60"]
  env:
    - {name: MODE, value: production}
    - {name: DB_PASSWORD, secretRef: {name: db, key: password}}
`

func TestSecretsAndEnvListForm(t *testing.T) {
	docs, err := Parse("s.yaml", []byte(secretFile), nil)
	if err != nil {
		t.Fatal(err)
	}
	sec, svc := docs[0].Secret, docs[1].Service
	if sec == nil || docs[0].Kind() != api.KindSecret || docs[0].Name() != "db" || sec.Spec.Keys["password"].Env != "DB_PASSWORD" {
		t.Fatalf("secret document: %+v", docs[0])
	}
	if svc.Spec.Env["MODE"] != "production" || svc.Spec.SecretEnv["DB_PASSWORD"] != (api.SecretKeyRef{Name: "db", Key: "password"}) {
		t.Fatalf("env %v, secretEnv %v", svc.Spec.Env, svc.Spec.SecretEnv)
	}
	if _, ok := svc.Spec.Env["DB_PASSWORD"]; ok {
		t.Fatal("a secret reference became a plain value")
	}
	values, errs := ResolveSecretValues(sec, func(k string) (string, bool) {
		return map[string]string{"DB_PASSWORD": "hunter2"}[k], k == "DB_PASSWORD"
	})
	if len(errs) != 1 || !strings.Contains(errs[0].Path, "spec.keys.ca.pem") || values["password"] != "hunter2" {
		t.Fatalf("resolve: %v %v", values, errs)
	}
}

func TestSecretSpecRejects(t *testing.T) {
	cases := map[string]struct{ from, to, want string }{
		"value in a Secret":      {"password: {env: DB_PASSWORD}", "password: {value: x}", "spec.keys.password.value: unknown field"},
		"no source":              {"password: {env: DB_PASSWORD}", "password: {}", "spec.keys.password: exactly one of env or file"},
		"secret from a secret":   {"password: {env: DB_PASSWORD}", "password: {name: other, key: k}", "not from another Secret"},
		"missing key":            {"key: password}", "key: pasword}", `Secret "db" (document 1) has no key "pasword"`},
		"value and ref":          {"{name: MODE, value: production}", "{name: MODE, value: p, secretRef: {name: db, key: password}}", "exactly one of value or secretRef"},
		"duplicate name":         {"{name: MODE, value: production}", "{name: DB_PASSWORD, value: x}", `duplicate "DB_PASSWORD"`},
		"reserved name":          {"name: DB_PASSWORD, secretRef", "name: GANTRY_X, secretRef", "reserved"},
		"incomplete ref":         {"{name: db, key: password}", "{name: db}", "name and key of a Secret are required"},
		"unknown field in entry": {"{name: MODE, value: production}", "{name: MODE, valu: production}", "env[0].valu: unknown field"},
		"unknown delivery":       {"{name: db, key: password}", "{name: db, key: password, as: volume}", `secretRef.as: "volume": want file`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Parse("s.yaml", []byte(strings.Replace(secretFile, c.from, c.to, 1)), nil)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
		})
	}
}

func TestMonitoringHeaderRefs(t *testing.T) {
	for ref, want := range map[string]string{
		"{name: otlp, key: token}":         "",
		"{env: OTLP_TOKEN}":                "",
		"{name: otlp}":                     "not a valid Secret name and key",
		"{env: X, name: otlp, key: token}": "exactly one of env, file, or name and key",
	} {
		src := "kind: Cluster\nmetadata: {name: dev}\nspec:\n  monitoring:\n    otlpLogsEndpoint: https://otel.example:4318\n    headers:\n      - {name: Authorization, secretRef: " + ref + "}\n  capacityGroups:\n    - {groupId: g, instanceType: local.small, minSize: 0, maxSize: 1}\n"
		_, err := Parse("c.yaml", []byte(src), nil)
		if (want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), want) {
			t.Errorf("secretRef %s: got %v, want %q", ref, err, want)
		}
	}
}

// No message about a Secret's data holds one of its values, whatever the
// keys and values.
func FuzzSecretDataErrorsHoldNoValue(f *testing.F) {
	f.Add("password", "hunter2-long-value", "db")
	f.Add("bad key!", "another-secret-value", "Bad_Name")
	f.Add("", "x-secret-value-x", "")
	f.Fuzz(func(t *testing.T, key, value, name string) {
		errs := ValidateSecretData(name, map[string]string{key: value})
		if len(value) < 8 || strings.Contains(key, value) || strings.Contains(name, value) {
			return // too short to tell, or named by the key or name itself
		}
		if strings.Contains(errs.Error(), value) {
			t.Fatalf("the message holds the value: %s", errs.Error())
		}
	})
}
