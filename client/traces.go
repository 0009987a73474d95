package client

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/sim/report"
)

// PutTrace keeps a demand trace (the CSV form of docs/simulate.md) on the
// server under name, for simulations; it replaces one of that name.
func (c *Client) PutTrace(ctx context.Context, name string, csv []byte) (*api.Trace, error) {
	var out api.Trace
	err := c.do(ctx, http.MethodPut, "/v1/traces/"+url.PathEscape(name), "text/csv", bytes.NewReader(csv), &out)
	return &out, err
}

// ListTraces lists the traces the server keeps.
func (c *Client) ListTraces(ctx context.Context) ([]api.Trace, error) {
	var out struct{ Items []api.Trace }
	return out.Items, c.getJSON(ctx, "/v1/traces", &out)
}

// DeleteTrace deletes a kept trace.
func (c *Client) DeleteTrace(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "/v1/traces/"+url.PathEscape(name), "", nil, nil)
}

// Simulate runs a kept trace through the control loop on the server's
// stored spec, once per policy: the results and their plot.
func (c *Client) Simulate(ctx context.Context, req api.SimulationRequest) (*report.Simulation, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	var out report.Simulation
	return &out, c.do(ctx, http.MethodPost, "/v1/simulations", "application/json", bytes.NewReader(body), &out)
}
