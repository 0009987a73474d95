package server

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/client"
	"github.com/gantry-dev/gantry/decide"
)

const idleWeb = `kind: Service
metadata: {name: web}
spec:
  cluster: dev
  command: ["sleep", "1000"]
  replicas: 0
  resources: {cpu: 500m, memory: 256Mi}
`

const burstTrace = `time,service,replicas
2026-01-01T00:00:00Z,web,1
2026-01-01T00:30:00Z,web,4
2026-01-01T01:30:00Z,web,1
2026-01-01T03:00:00Z,web,1
`

// A trace is kept (checked against the stored services) and run through
// the control loop on the stored spec, once per policy over the server's
// settings: results side by side and their plot; bad traces, policies and
// names are refused naming what, and one simulation runs at a time.
func TestSimulationsRunAStoredTraceOnTheStoredSpec(t *testing.T) {
	ts, ctx := withTestCluster(t, nil)
	if _, err := ts.admin.Apply(ctx, []byte(idleWeb)); err != nil {
		t.Fatal(err)
	}
	kept, err := ts.admin.PutTrace(ctx, "burst", []byte(burstTrace))
	if err != nil {
		t.Fatal(err)
	}
	if kept.Rows != 4 || !slices.Equal(kept.Services, []string{"web"}) || kept.End.Sub(kept.Start).Hours() != 3 {
		t.Fatalf("kept %+v, want 4 rows of web over 3h", kept)
	}
	refused := func(what string, err error, status int, mention string) {
		t.Helper()
		if !client.IsStatus(err, status) || !strings.Contains(err.Error(), mention) {
			t.Errorf("%s: %v, want %d naming %q", what, err, status, mention)
		}
	}
	_, err = ts.admin.PutTrace(ctx, "typo", []byte("time,service,replicas\n2026-01-01T00:00:00Z,db,1\n"))
	refused("a trace of a service the spec lacks", err, http.StatusUnprocessableEntity, "db")
	_, err = ts.admin.PutTrace(ctx, "Bad Name", []byte(burstTrace))
	refused("a bad name", err, http.StatusBadRequest, "trace name")
	if traces, err := ts.admin.ListTraces(ctx); err != nil || len(traces) != 1 || traces[0].Name != "burst" {
		t.Fatalf("traces after the refusals: %+v %v, want burst alone", traces, err)
	}

	sim, err := ts.admin.Simulate(ctx, api.SimulationRequest{Trace: "burst", Policies: []api.SimulationPolicy{
		{Name: "warm", Settings: map[string]string{"warm-pool": "2"}},
		{Name: "lean", Settings: map[string]string{"empty-machine-ttl": "1m"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(sim.Results) != 2 || sim.Results[0].Policy != "warm" || sim.Results[1].Policy != "lean" {
		t.Fatalf("results %+v, want warm then lean", sim.Results)
	}
	for _, r := range sim.Results {
		if r.Cost <= 0 || r.Disruptions.Launches == 0 {
			t.Errorf("policy %s: cost %v, %d launches: the burst was not served", r.Policy, r.Cost, r.Disruptions.Launches)
		}
		// The spec's clusters are on the local provider: its world, in
		// which machines join long before the join timeout.
		if r.World != "local" || r.Disruptions.Terminations[decide.CauseJoinTimeout] != 0 {
			t.Errorf("policy %s: world %q, %d join timeouts: want the local provider's world, none", r.Policy, r.World, r.Disruptions.Terminations[decide.CauseJoinTimeout])
		}
	}
	if sim.Results[0].Cost <= sim.Results[1].Cost {
		t.Errorf("a warm pool of two cost %v, none %v: want the warm policy dearer", sim.Results[0].Cost, sim.Results[1].Cost)
	}
	if !strings.Contains(sim.Plot, "<svg") || !strings.Contains(sim.Plot, "lean") {
		t.Errorf("the plot is no SVG of both policies: %.200s", sim.Plot)
	}

	readOnly, err := ts.admin.CreateToken(ctx, api.TokenRequest{Kind: api.TokenReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	reader := client.New(ts.URL(), readOnly.Secret, ts.http)
	if again, err := reader.Simulate(ctx, api.SimulationRequest{Trace: "burst"}); err != nil || len(again.Results) != 1 || again.Results[0].Policy != "this server" ||
		again.Results[0].Over != "this server's settings" {
		t.Errorf("a read-only token simulating with the server's settings: %v, %v", again, err)
	}
	_, err = reader.PutTrace(ctx, "mine", []byte(burstTrace))
	refused("a read-only token keeping a trace", err, http.StatusForbidden, "read")
	_, err = ts.admin.Simulate(ctx, api.SimulationRequest{Trace: "burst", Policies: []api.SimulationPolicy{{Name: "x", Settings: map[string]string{"listen": ":1"}}}})
	refused("a policy key that is no decision setting", err, http.StatusBadRequest, "listen")
	_, err = ts.admin.Simulate(ctx, api.SimulationRequest{Trace: "burst", World: "bootToJoin: {min: 5s, max: 1s}\n"})
	refused("a world whose span runs backwards", err, http.StatusBadRequest, "bootToJoin")
	_, err = ts.admin.Simulate(ctx, api.SimulationRequest{Trace: "missing"})
	refused("an unknown trace", err, http.StatusNotFound, "missing")

	ts.simulating <- struct{}{}
	_, err = ts.admin.Simulate(ctx, api.SimulationRequest{Trace: "burst"})
	<-ts.simulating
	refused("a simulation while one runs", err, http.StatusTooManyRequests, "already")

	if err := ts.admin.DeleteTrace(ctx, "burst"); err != nil {
		t.Fatal(err)
	}
	if traces, err := ts.admin.ListTraces(ctx); err != nil || len(traces) != 0 {
		t.Fatalf("traces after the delete: %+v %v", traces, err)
	}
	err = ts.admin.DeleteTrace(context.Background(), "burst")
	refused("deleting it again", err, http.StatusNotFound, "burst")
}

// The dashboard's Simulate page runs a kept trace with the two policies
// written on it and shows the table and the plot (an image); a policy
// the server refuses is shown naming its key; the page is not live.
func TestDashboardSimulatePage(t *testing.T) {
	ts, ctx := withTestCluster(t, nil)
	if _, err := ts.admin.Apply(ctx, []byte(idleWeb)); err != nil {
		t.Fatal(err)
	}
	hc, _ := ts.signedIn(t, ts.AdminToken())
	if page := getPage(t, hc, ts.URL()+"/ui/simulate"); !strings.Contains(page, `id="no-traces"`) || strings.Contains(page, "sse-connect") {
		t.Fatalf("the page without traces offers none, and is not live:\n%s", page)
	}
	if _, err := ts.admin.PutTrace(ctx, "burst", []byte(burstTrace)); err != nil {
		t.Fatal(err)
	}
	form := url.Values{"trace": {"burst"}, "seed": {"3"}, "run": {"1"},
		"a": {"name: warm\nwarm-pool: 2\n"}, "b": {"name: lean\n"}}
	page := html.UnescapeString(getPage(t, hc, ts.URL()+"/ui/simulate?"+form.Encode()))
	for _, want := range []string{`id="simulation-plot" src="data:image/svg+xml;base64,`, `id="simulation-table"`, "warm: warm-pool=2 (over this server's settings)",
		"lean: this server's settings", "cost"} {
		if !strings.Contains(page, want) {
			t.Errorf("the simulation's page lacks %s:\n%.3000s", want, page)
		}
	}
	if strings.Contains(page, "simulate-error") {
		t.Fatalf("the simulation failed:\n%s", page)
	}
	form.Set("b", "name: lean\nlisten: \":1\"\n")
	page = getPage(t, hc, ts.URL()+"/ui/simulate?"+form.Encode())
	if !strings.Contains(page, `id="simulate-error"`) || !strings.Contains(page, "listen") || strings.Contains(page, "simulation-plot") {
		t.Errorf("a policy with a key that is no setting: want the refusal naming it, no plot:\n%s", page)
	}
}
