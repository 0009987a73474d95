package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/auth"
	"github.com/gantry-dev/gantry/client"
	"github.com/gantry-dev/gantry/internal/pki"
	"github.com/gantry-dev/gantry/store"
	"github.com/gantry-dev/gantry/store/storetest"
)

const testCluster = `kind: Cluster
metadata: {name: dev}
spec:
  capacityGroups:
    - {groupId: general, instanceType: local.small, minSize: 0, maxSize: 3}
---
kind: Cluster
metadata: {name: other}
spec:
  capacityGroups:
    - {groupId: general, instanceType: local.small, minSize: 0, maxSize: 3}
`

type testServer struct {
	*Server
	admin *client.Client
	// http trusts the server's CA.
	http *http.Client
	// stop ends Run and waits for it (again: a no-op).
	stop func()
}

// stopNow stops the server's loop and API, as a shutdown does.
func (ts *testServer) stopNow(t *testing.T) { ts.stop() }

func startServer(t testing.TB, edit func(*Config)) *testServer {
	t.Helper()
	return startServerWith(t, edit, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

func startServerWith(t testing.TB, edit func(*Config), log *slog.Logger) *testServer {
	t.Helper()
	cfg := DefaultConfig(t.TempDir())
	cfg.Listen = "127.0.0.1:0"
	cfg.Controller.Interval = 100 * time.Millisecond
	cfg.LocalExitWithServer = true
	if edit != nil {
		edit(&cfg)
	}
	// Every Update runs its function twice: handlers must keep to the
	// store's contract (no effect outside the transaction).
	wrap := cfg.WrapStore
	cfg.WrapStore = func(s store.Store) store.Store {
		if wrap != nil {
			s = wrap(s)
		}
		return storetest.Rerun(s)
	}
	srv, err := New(context.Background(), cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(func() {
		stop()
		if srv.Leading() {
			_ = srv.TerminateAll(context.Background(), "test over", nil)
		}
		srv.Close()
	})
	<-srv.Ready()
	return newTestServer(t, srv, stop)
}

func newTestServer(t testing.TB, srv *Server, stop func()) *testServer {
	t.Helper()
	hc := trustingClient(t, srv.cfg.DataDir)
	return &testServer{Server: srv, admin: client.New(srv.URL(), srv.AdminToken(), hc), http: hc, stop: stop}
}

// trustingClient trusts the CA the server in dataDir wrote, if any.
func trustingClient(t testing.TB, dataDir string) *http.Client {
	t.Helper()
	caPEM, err := os.ReadFile(CACertPath(dataDir))
	if errors.Is(err, os.ErrNotExist) {
		return &http.Client{}
	}
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pki.PoolClientConfig(caPEM)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
}

// withTestCluster starts a server and applies testCluster to it.
func withTestCluster(t testing.TB, edit func(*Config)) (*testServer, context.Context) {
	t.Helper()
	ts := startServer(t, edit)
	ctx := context.Background()
	if _, err := ts.admin.Apply(ctx, []byte(testCluster)); err != nil {
		t.Fatal(err)
	}
	return ts, ctx
}

// joinManual registers a machine with a hand-minted join token and returns
// its credential.
func (ts *testServer) joinManual(t *testing.T, cluster, machineID string) string {
	t.Helper()
	tok, err := ts.admin.CreateJoinToken(context.Background(), api.JoinTokenRequest{Cluster: cluster, Group: "general"})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := ts.admin.Join(context.Background(), api.JoinRequest{Token: tok.Token, Cluster: cluster, MachineID: machineID,
		Inventory: api.Inventory{Capacity: api.Resources{MilliCPU: 1000, MemoryBytes: 1 << 30}, Runtimes: []string{"process"}}})
	if err != nil {
		t.Fatal(err)
	}
	return resp.Credential
}

func (ts *testServer) do(t *testing.T, method, path, token, contentType string, body []byte) (int, api.ErrorBody) {
	t.Helper()
	req, _ := http.NewRequest(method, ts.URL()+path, bytes.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := ts.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var eb api.ErrorBody
	data, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(data, &eb)
	return resp.StatusCode, eb
}

func TestAdminTokenGeneratedWithMode0600(t *testing.T) {
	ts := startServer(t, nil)
	info, err := os.Stat(ts.AdminTokenPath())
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Fatalf("admin token mode %v, want 0600", info.Mode().Perm())
	}
	data, _ := os.ReadFile(ts.AdminTokenPath())
	if strings.TrimSpace(string(data)) != ts.AdminToken() {
		t.Fatal("file does not hold the admin token")
	}
}

func TestMachineCredentialIsConfinedToItsMachine(t *testing.T) {
	ts := startServer(t, nil)
	ctx := context.Background()
	if _, err := ts.admin.Apply(ctx, []byte(testCluster)); err != nil {
		t.Fatal(err)
	}
	credA := ts.joinManual(t, "dev", "machine-a")
	ts.joinManual(t, "dev", "machine-b")
	hb, _ := json.Marshal(api.HeartbeatRequest{})

	forbidden := []struct{ method, path string }{
		{"GET", "/v1/machines/machine-b/assignments"},
		{"POST", "/v1/machines/machine-b/heartbeat"},
		{"GET", "/v1/services"},
		{"GET", "/v1/clusters/dev"},
		{"GET", "/v1/machines"},
		{"POST", "/v1/apply"},
		{"DELETE", "/v1/clusters/dev"},
		{"POST", "/v1/join-tokens"},
	}
	for _, f := range forbidden {
		status, eb := ts.do(t, f.method, f.path, credA, "application/json", hb)
		if status != http.StatusForbidden {
			t.Errorf("%s %s with machine-a's credential: HTTP %d (%s), want 403", f.method, f.path, status, eb.Error.Message)
		}
	}
	if status, eb := ts.do(t, "GET", "/v1/machines/machine-a/assignments", credA, "", nil); status != http.StatusOK {
		t.Fatalf("own assignments: HTTP %d %s", status, eb.Error.Message)
	}
	if status, _ := ts.do(t, "POST", "/v1/machines/machine-a/heartbeat", credA, "application/json", hb); status != http.StatusOK {
		t.Fatalf("own heartbeat: HTTP %d", status)
	}
	if status, _ := ts.do(t, "GET", "/v1/machines/machine-a/assignments", credA+"x", "", nil); status != http.StatusUnauthorized {
		t.Fatalf("altered credential: HTTP %d, want 401", status)
	}
	// Nothing the refused calls tried took effect.
	if _, err := ts.admin.GetCluster(ctx, "dev"); err != nil {
		t.Fatalf("cluster gone after refused delete: %v", err)
	}
}

func TestJoinTokenRefusals(t *testing.T) {
	ts := startServer(t, nil)
	ctx := context.Background()
	if _, err := ts.admin.Apply(ctx, []byte(testCluster)); err != nil {
		t.Fatal(err)
	}
	expired, _ := ts.signer.Mint(auth.JoinClaims{Cluster: "dev", Group: "general", ExpiresAt: time.Now().Add(-time.Second)})
	foreignSigner, _ := auth.NewSigner([]byte(auth.NewKey()))
	foreign, _ := foreignSigner.Mint(auth.JoinClaims{Cluster: "dev", Group: "general", ExpiresAt: time.Now().Add(time.Hour)})
	forOther, _ := ts.signer.Mint(auth.JoinClaims{Cluster: "other", Group: "general", ExpiresAt: time.Now().Add(time.Hour)})
	forMachine, _ := ts.signer.Mint(auth.JoinClaims{Cluster: "dev", Group: "general", MachineID: "m-1", ExpiresAt: time.Now().Add(time.Hour)})
	cases := []struct {
		name, token, cluster, machine string
		status                        int
		message                       string
	}{
		{"expired", expired, "dev", "", 401, "expired"},
		{"foreign key", foreign, "dev", "", 401, "not signed by this server"},
		{"other cluster", forOther, "dev", "", 403, "another cluster"},
		{"other machine", forMachine, "dev", "m-2", 403, "another machine"},
		{"garbage", "gjt1.x.y", "dev", "", 401, "join token"},
		{"empty", "", "dev", "", 401, "join token"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ts.admin.WithToken("").Join(ctx, api.JoinRequest{Token: tc.token, Cluster: tc.cluster, MachineID: tc.machine})
			var apiErr *client.APIError
			if !errorAs(err, &apiErr) || apiErr.Status != tc.status || !strings.Contains(apiErr.Message, tc.message) {
				t.Fatalf("got %v, want HTTP %d mentioning %q", err, tc.status, tc.message)
			}
			if strings.Contains(err.Error(), tc.token) && tc.token != "" {
				t.Fatal("the error echoes the token")
			}
		})
	}
	machines, err := ts.admin.ListMachines(ctx, "")
	if err != nil || len(machines) != 0 {
		t.Fatalf("refused joins registered machines: %v %v", machines, err)
	}
}

func TestBadInputChangesNothing(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.MaxRequestBytes = 4096 })
	ctx := context.Background()
	if _, err := ts.admin.Apply(ctx, []byte(testCluster)); err != nil {
		t.Fatal(err)
	}
	before := ts.stateFingerprint(t)
	admin := ts.AdminToken()
	service := "kind: Service\nmetadata: {name: web}\nspec:\n  cluster: dev\n  command: [x]\n"
	cases := []struct {
		name, method, path, token, ctype string
		body                             string
		status                           int
		field, message                   string
	}{
		{"malformed JSON", "POST", "/v1/join-tokens", admin, "application/json", `{"cluster": "dev",`, 400, "", "request body"},
		{"unknown JSON field", "POST", "/v1/join-tokens", admin, "application/json", `{"cluster":"dev","group":"general","colour":"red"}`, 400, "colour", "unknown field"},
		{"wrong JSON type", "POST", "/v1/join-tokens", admin, "application/json", `{"cluster": 7}`, 400, "cluster", "cannot unmarshal"},
		{"malformed YAML", "POST", "/v1/apply", admin, "application/yaml", "kind: [", 400, "", "not valid YAML"},
		{"unknown spec field", "POST", "/v1/apply", admin, "application/yaml", service + "  colour: red\n", 400, "spec.colour", "unknown field"},
		{"bad quantity", "POST", "/v1/apply", admin, "application/yaml", service + "  resources: {cpu: lots}\n", 400, "spec.resources.cpu", "invalid cpu quantity"},
		{"expose without ports", "POST", "/v1/apply", admin, "application/yaml", service + "  expose: [{port: 8080}]\n", 400, "spec.expose[0]", "declares no ports"},
		{"expose out of range", "POST", "/v1/apply", admin, "application/yaml", service + "  ports: [{name: http}]\n  expose: [{port: 70000}]\n", 400, "spec.expose[0].port", "between 1 and 65535"},
		{"expose of another port", "POST", "/v1/apply", admin, "application/yaml", service + "  ports: [{name: http}]\n  expose: [{port: 8080, targetPort: grpc}]\n", 400, "spec.expose[0].targetPort", "not declared"},
		{"service of missing cluster", "POST", "/v1/apply", admin, "application/yaml", strings.Replace(service, "cluster: dev", "cluster: nope", 1), 422, "spec.cluster", "not found"},
		{"immutable CIDR", "POST", "/v1/apply", admin, "application/yaml", strings.Replace(testCluster, "spec:\n", "spec:\n  containerCidr: 10.9.0.0/16\n", 1), 422, "spec.containerCidr", "immutable"},
		{"immutable instance type", "POST", "/v1/apply", admin, "application/yaml", strings.Replace(testCluster, "local.small", "local.large", 1), 422, "spec.capacityGroups[0].instanceType", "immutable"},
		{"rename via PUT", "PUT", "/v1/clusters/dev", admin, "application/yaml", strings.SplitN(strings.Replace(testCluster, "name: dev", "name: renamed", 1), "---", 2)[0], 422, "metadata.name", "immutable"},
		{"oversize body", "POST", "/v1/apply", admin, "application/yaml", service + "# " + strings.Repeat("x", 5000) + "\n", 413, "", "exceeds 4096 bytes"},
		{"no token", "POST", "/v1/apply", "", "application/yaml", service, 401, "", "missing bearer token"},
		{"wrong token", "POST", "/v1/apply", "gat1.wrong", "application/yaml", service, 401, "", "invalid token"},
		{"cluster with services", "DELETE", "/v1/clusters/nope", admin, "", "", 404, "", "not found"},
		{"bad event limit", "GET", "/v1/events?limit=0", admin, "", "", 400, "limit", "limit"},
		{"unknown route", "GET", "/v1/nothing", admin, "", "", 404, "", "no route"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, eb := ts.do(t, tc.method, tc.path, tc.token, tc.ctype, []byte(tc.body))
			if status != tc.status {
				t.Fatalf("HTTP %d (%+v), want %d", status, eb.Error, tc.status)
			}
			if eb.Error.Field != tc.field || !strings.Contains(eb.Error.Message, tc.message) {
				t.Fatalf("error %+v, want field %q and message with %q", eb.Error, tc.field, tc.message)
			}
		})
	}
	if after := ts.stateFingerprint(t); after != before {
		t.Fatalf("bad requests changed state:\nbefore %s\nafter  %s", before, after)
	}
}

// stateFingerprint is every declared resource and machine, serialized.
func (ts *testServer) stateFingerprint(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	clusters, err1 := ts.admin.ListClusters(ctx)
	services, err2 := ts.admin.ListServices(ctx)
	machines, err3 := ts.admin.ListMachines(ctx, "")
	if err1 != nil || err2 != nil || err3 != nil {
		t.Fatal(err1, err2, err3)
	}
	for i := range clusters {
		clusters[i].Status = nil
	}
	data, _ := json.Marshal([]any{clusters, services, machines})
	return string(data)
}

func TestApplyReportsChanges(t *testing.T) {
	ts := startServer(t, nil)
	ctx := context.Background()
	res, err := ts.admin.Apply(ctx, []byte(testCluster))
	if err != nil || res.Results[0].Action != api.ActionCreated {
		t.Fatalf("create: %+v %v", res, err)
	}
	res, err = ts.admin.Apply(ctx, []byte(testCluster))
	if err != nil || res.Results[0].Action != api.ActionUnchanged {
		t.Fatalf("re-apply: %+v %v", res, err)
	}
	res, err = ts.admin.Apply(ctx, []byte(strings.Replace(testCluster, "maxSize: 3", "maxSize: 5", 1)))
	if err != nil || res.Results[0].Action != api.ActionConfigured || len(res.Results[0].Changes) != 1 {
		t.Fatalf("update: %+v %v", res, err)
	}
	c, _ := ts.admin.GetCluster(ctx, "dev")
	if c.Metadata.Generation != 2 || c.Spec.CapacityGroups[0].MaxSize != 5 {
		t.Fatalf("stored: generation %d, %+v", c.Metadata.Generation, c.Spec.CapacityGroups)
	}
}

func TestOpenAPIListsEveryRoute(t *testing.T) {
	ts := startServer(t, nil)
	resp, err := ts.http.Get(ts.URL() + "/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		OpenAPI string                    `json:"openapi"`
		Paths   map[string]map[string]any `json:"paths"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || doc.OpenAPI == "" {
		t.Fatalf("openapi.json: %v (version %q)", err, doc.OpenAPI)
	}
	for _, rt := range ts.routes() {
		method, path, _ := strings.Cut(rt.pattern, " ")
		if _, ok := doc.Paths[path][strings.ToLower(method)]; !ok {
			t.Errorf("route %s is not in openapi.json", rt.pattern)
		}
	}
	repoCopy, err := os.ReadFile(filepath.Join("openapi.json"))
	if err != nil || !bytes.Equal(repoCopy, OpenAPI) {
		t.Fatal("served OpenAPI differs from server/openapi.json")
	}
}

func errorAs(err error, target **client.APIError) bool {
	e, ok := err.(*client.APIError)
	if ok {
		*target = e
	}
	return ok
}

func TestMetricsAreExposed(t *testing.T) {
	ts := startServer(t, nil)
	if _, err := ts.admin.Apply(context.Background(), []byte(testCluster)); err != nil {
		t.Fatal(err)
	}
	ts.joinManual(t, "dev", "machine-a")
	var body string
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := ts.http.Get(ts.URL() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(data)
		if strings.Contains(body, `gantry_machines{cluster="dev",fleet_state="ready",join_state="joined"} 1`) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, want := range []string{
		`gantry_machines{cluster="dev",fleet_state="ready",join_state="joined"} 1`,
		`gantry_pending_replicas{cluster="dev"} 0`,
		"gantry_reconcile_duration_seconds_count",
		`gantry_api_requests_total{code="200",route="POST /v1/join"} 1`,
		`gantry_api_request_duration_seconds_count{route="POST /v1/apply"} 1`,
		`gantry_leader_changes_total{to="leading"} 1`,
		"go_goroutines",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(body, ts.AdminToken()) {
		t.Fatal("/metrics shows the admin token")
	}
}

func TestSecretValuesNeverLeaveTheServer(t *testing.T) {
	t.Setenv("GANTRY_TEST_OTLP_TOKEN", "s3cr3t-value")
	ts := startServer(t, nil)
	spec := strings.Replace(testCluster, "spec:\n", "spec:\n  monitoring:\n    headers: [{name: Authorization, secretRef: {env: GANTRY_TEST_OTLP_TOKEN}}]\n", 1)
	res, err := ts.admin.Apply(context.Background(), []byte(spec))
	if err != nil {
		t.Fatal(err)
	}
	c, err := ts.admin.GetCluster(context.Background(), "dev")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal([]any{res, c})
	if strings.Contains(string(data), "s3cr3t-value") {
		t.Fatal("the secret value is in an API response")
	}
	if h := c.Spec.Monitoring.Headers[0]; len(h.ValueSHA256) != 64 {
		t.Fatalf("stored header %+v", h)
	}
	missing := strings.Replace(spec, "GANTRY_TEST_OTLP_TOKEN", "GANTRY_TEST_NOT_SET", 1)
	status, eb := ts.do(t, "POST", "/v1/apply", ts.AdminToken(), "application/yaml", []byte(missing))
	if status != 422 || !strings.Contains(eb.Error.Message, "GANTRY_TEST_NOT_SET is not set on the server") {
		t.Fatalf("missing secret: HTTP %d %+v", status, eb.Error)
	}
}
