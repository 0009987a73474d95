package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/auth"
	"github.com/gantry-dev/gantry/client"
	"github.com/gantry-dev/gantry/store"
)

const (
	dbPassword = "pw-7f3a9c-never-shown"
	otlpToken  = "otlp-51bd-never-shown"
)

const secretServices = `kind: Service
metadata: {name: api}
spec:
  cluster: dev
  command: [sleep, "60"]
  env:
    - {name: MODE, value: production}
    - {name: DB_PASSWORD, secretRef: {name: db, key: password}}
---
kind: Service
metadata: {name: plain}
spec:
  cluster: dev
  command: [sleep, "60"]
  env: {MODE: production}
`

// placed waits until the control loop has placed every replica, and
// returns each replica's machine.
func placed(t *testing.T, ts *testServer, replicas int) map[string]string {
	t.Helper()
	where := map[string]string{}
	waitFor(t, 30*time.Second, "replicas placed", func() bool {
		list, err := ts.admin.ListReplicas(context.Background(), "")
		clear(where)
		for _, r := range list {
			if r.Machine != "" {
				where[r.ID] = r.Machine
			}
		}
		return err == nil && len(where) == replicas
	})
	return where
}

// A Secret's values reach only the machine running a replica that uses
// them, in that replica's assignment alone; no API answer, event or
// stored row holds them; new values are a new revision of the services
// that use them (they roll), and of no other.
func TestSecretValuesReachOnlyTheirReplicas(t *testing.T) {
	ts, ctx := withTestCluster(t, nil)
	sec, err := ts.admin.CreateSecret(ctx, "db", map[string]string{"password": dbPassword}, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(sec.Status.Keys) != 1 || sec.Status.Keys[0] != "password" || sec.Status.Revision == "" {
		t.Fatalf("created secret reads %+v", sec)
	}
	credentials := map[string]string{"m1": ts.joinManual(t, "dev", "m1"), "m2": ts.joinManual(t, "dev", "m2")}
	if _, err := ts.admin.Apply(ctx, []byte(strings.Replace(secretServices, "command: [sleep, \"60\"]\n  env: {", "command: [sleep, \"60\"]\n  replicas: 2\n  env: {", 1))); err != nil {
		t.Fatal(err)
	}
	where := placed(t, ts, 3)
	assignments := func() map[string]api.Assignment {
		out := map[string]api.Assignment{}
		for machine, credential := range credentials {
			list, err := client.New(ts.URL(), credential, ts.http).Assignments(ctx, machine)
			if err != nil {
				t.Fatal(err)
			}
			hasUser := false
			for _, as := range list {
				out[as.ReplicaID] = as
				hasUser = hasUser || as.Service == "api"
			}
			if data, _ := json.Marshal(list); !hasUser && strings.Contains(string(data), "never-shown") {
				t.Fatalf("machine %s runs no replica that uses the Secret and received its value", machine)
			}
		}
		return out
	}
	first := assignments()
	if got := first["api-0"].SecretEnv["DB_PASSWORD"]; got != dbPassword || first["api-0"].Spec.Env["MODE"] != "production" {
		t.Fatalf("api-0 on %s: secret value given: %v, env %v", where["api-0"], got == dbPassword, first["api-0"].Spec.Env)
	}
	for _, id := range []string{"plain-0", "plain-1"} {
		if len(first[id].SecretEnv) != 0 {
			t.Fatalf("%s, which uses no Secret, was given secret values", id)
		}
	}

	if _, err := ts.admin.CreateSecret(ctx, "db", map[string]string{"password": "rotated-" + dbPassword}, true); err != nil {
		t.Fatal(err)
	}
	// No agent runs here, so the old replica (never available) makes way
	// at once for the new revision's.
	waitFor(t, 30*time.Second, "the new revision's replica placed", func() bool { return placed(t, ts, 3)["api-0-r2"] != "" })
	rotated := assignments()
	if next := rotated["api-0-r2"]; next.SpecHash == first["api-0"].SpecHash || next.SecretEnv["DB_PASSWORD"] != "rotated-"+dbPassword {
		t.Fatalf("after rotation: the new revision's replica has hash %s (was %s)", next.SpecHash, first["api-0"].SpecHash)
	}
	if rotated["plain-0"].SpecHash != first["plain-0"].SpecHash || len(rotated) != 3 {
		t.Fatalf("a replica that does not use the Secret would roll: %d assignments", len(rotated))
	}

	var answers []any
	list, _ := ts.admin.ListSecrets(ctx)
	services, _ := ts.admin.ListServices(ctx)
	events, _ := ts.admin.ListEvents(ctx, client.EventQuery{})
	answers = append(answers, list, services, events)
	for _, path := range []string{"/v1/secrets/db", "/v1/secrets"} {
		_, body := ts.get(t, path)
		answers = append(answers, body)
	}
	if data, _ := json.Marshal(answers); strings.Contains(string(data), "never-shown") {
		t.Fatalf("an API answer holds the value: %s", data)
	}
	if err := ts.store.View(ctx, func(tx store.Tx) error {
		_, sealed, err := tx.GetSecret("db")
		if !auth.IsSealed(sealed) || strings.Contains(sealed, "never-shown") {
			t.Errorf("stored in clear: %q", sealed)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// References are kept whole: apply refuses a missing Secret or key, and a
// Secret in use can neither be deleted nor lose a key in use.
func TestSecretReferencesAreKeptWhole(t *testing.T) {
	ts, ctx := withTestCluster(t, nil)
	status, eb := ts.do(t, "POST", "/v1/apply", ts.AdminToken(), "application/yaml", []byte(secretServices))
	if status != http.StatusUnprocessableEntity || eb.Error.Field != "spec.env[name=DB_PASSWORD].secretRef" || !strings.Contains(eb.Error.Message, `secret "db" not found`) {
		t.Fatalf("apply with a missing Secret: HTTP %d %+v", status, eb.Error)
	}
	if services, _ := ts.admin.ListServices(ctx); len(services) != 0 {
		t.Fatalf("a refused apply stored %d services", len(services))
	}
	if _, err := ts.admin.CreateSecret(ctx, "db", map[string]string{"password": dbPassword}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.admin.Apply(ctx, []byte(secretServices)); err != nil {
		t.Fatal(err)
	}
	if err := ts.admin.DeleteSecret(ctx, "db"); !client.IsStatus(err, http.StatusConflict) || !strings.Contains(err.Error(), "service/api") {
		t.Fatalf("delete a Secret in use: %v", err)
	}
	if _, err := ts.admin.CreateSecret(ctx, "db", map[string]string{"user": "x"}, true); !client.IsStatus(err, http.StatusConflict) {
		t.Fatalf("drop a key in use: %v", err)
	}
	if _, err := ts.admin.CreateSecret(ctx, "db", map[string]string{"password": "x"}, false); !client.IsStatus(err, http.StatusConflict) {
		t.Fatalf("create over an existing Secret: %v", err)
	}
	if _, err := ts.admin.CreateSecret(ctx, "db", map[string]string{"bad key!": dbPassword}, true); err == nil || strings.Contains(err.Error(), "never-shown") {
		t.Fatalf("an invalid key: %v", err)
	}
}

// A Secret declared in a spec takes its values from the server's
// environment; a cluster's monitoring headers may use it, its agents get
// the value at join, and new values roll the cluster's machines.
func TestSecretDocumentsAndMonitoringHeaders(t *testing.T) {
	t.Setenv("GANTRY_TEST_OTLP_TOKEN", otlpToken)
	ts := startServer(t, nil)
	ctx := context.Background()
	file := "kind: Secret\nmetadata: {name: otlp}\nspec:\n  keys: {token: {env: GANTRY_TEST_OTLP_TOKEN}}\n---\n" +
		strings.Replace(testCluster, "spec:\n", "spec:\n  monitoring:\n    otlpLogsEndpoint: https://otel.example:4318\n    headers: [{name: Authorization, secretRef: {name: otlp, key: token}}]\n", 1)
	res, err := ts.admin.Apply(ctx, []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	if data, _ := json.Marshal(res); strings.Contains(string(data), otlpToken) {
		t.Fatal("the apply result holds the value")
	}
	again, err := ts.admin.Apply(ctx, []byte(strings.Replace(file, "metadata: {name: otlp}", "metadata: {name: otlp, labels: {team: obs}}", 1)))
	if err != nil {
		t.Fatal(err)
	}
	for _, item := range again.Results {
		if item.Kind == api.KindSecret && (item.Action != api.ActionConfigured || strings.Join(item.Changes, ",") != "metadata.labels") {
			t.Fatalf("a labels-only change applies as %s %v", item.Action, item.Changes)
		}
	}
	tok, err := ts.admin.CreateJoinToken(ctx, api.JoinTokenRequest{Cluster: "dev", Group: "general"})
	if err != nil {
		t.Fatal(err)
	}
	joined, err := ts.admin.Join(ctx, api.JoinRequest{Token: tok.Token, Cluster: "dev", MachineID: "m1",
		Inventory: api.Inventory{Capacity: api.Resources{MilliCPU: 1000, MemoryBytes: 1 << 30}, Runtimes: []string{"process"}}})
	if err != nil {
		t.Fatal(err)
	}
	if joined.Monitoring == nil || joined.Monitoring.Headers["Authorization"] != otlpToken {
		t.Fatalf("the agent's monitoring: %+v", joined.Monitoring)
	}
	templateOf := func() string {
		c, err := ts.admin.GetCluster(ctx, "dev")
		if err != nil {
			t.Fatal(err)
		}
		return c.Spec.Monitoring.Headers[0].ValueSHA256
	}
	before := templateOf()
	if !strings.HasPrefix(before, "secret-revision:") || strings.HasSuffix(before, "pending") {
		t.Fatalf("header stamped %q", before)
	}
	if _, err := ts.admin.CreateSecret(ctx, "otlp", map[string]string{"token": "new-" + otlpToken}, true); err != nil {
		t.Fatal(err)
	}
	if after := templateOf(); after == before {
		t.Fatal("new values leave the machine template as it was: machines would keep the old header")
	}
	if sec, err := ts.admin.GetSecret(ctx, "otlp"); err != nil || sec.Metadata.Labels["team"] != "obs" {
		t.Fatalf("new values through the API dropped the Secret's labels: %+v %v", sec, err)
	}
}
