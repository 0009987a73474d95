package ui

import (
	"context"
	"encoding/base64"
	"errors"
	"html/template"
	"net/url"
	"strconv"
	"strings"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/client"
	"github.com/gantry-dev/gantry/sim/policy"
	"github.com/gantry-dev/gantry/sim/report"
)

// The policies the simulate page offers before any is written: the
// server's own settings, and one that waits longer and saves more
// before it replaces a machine.
const (
	defaultPolicyA = "name: this-server\n"
	defaultPolicyB = "name: patient\nsavings-floor: \"0.25\"\nmin-lifetime: 1h\n"
)

// simulatePage is the simulate page: the form, and when it was sent the
// simulation's table and plot, or why it was refused.
type simulatePage struct {
	Traces           []api.Trace
	Trace            string
	PolicyA, PolicyB string
	World, Seed      string
	Ran              bool
	Error            string
	Table            string
	Plot             template.URL
	LeftOut          []string
}

// loadSimulate runs the form's simulation (run=1) through the API: a
// stored trace on the stored spec, with the two policies written on the
// page. A refused trace or policy is shown on the page, naming what.
func loadSimulate(ctx context.Context, c *client.Client, q url.Values, _ *Dashboard) (any, error) {
	traces, err := c.ListTraces(ctx)
	if err != nil {
		return nil, err
	}
	page := simulatePage{Traces: traces, Trace: q.Get("trace"), PolicyA: q.Get("a"), PolicyB: q.Get("b"), World: q.Get("world"), Seed: q.Get("seed")}
	if page.PolicyA == "" && page.PolicyB == "" {
		page.PolicyA, page.PolicyB = defaultPolicyA, defaultPolicyB
	}
	if page.Seed == "" {
		page.Seed = "1"
	}
	if page.Trace == "" && len(traces) > 0 {
		page.Trace = traces[0].Name
	}
	if q.Get("run") == "" {
		return page, nil
	}
	page.Ran = true
	if err := page.run(ctx, c); err != nil {
		var apiErr *client.APIError
		if errors.As(err, &apiErr) && apiErr.Status == 401 {
			return nil, err
		}
		page.Error = err.Error()
	}
	return page, nil
}

func (p *simulatePage) run(ctx context.Context, c *client.Client) error {
	req := api.SimulationRequest{Trace: p.Trace, World: p.World}
	seed, err := strconv.ParseUint(strings.TrimSpace(p.Seed), 10, 64)
	if err != nil {
		return errors.New("seed: want a whole number")
	}
	req.Seed = seed
	for i, text := range []string{p.PolicyA, p.PolicyB} {
		if strings.TrimSpace(text) == "" {
			continue
		}
		read, err := policy.Read("policy "+string(rune('A'+i)), []byte(text))
		if err != nil {
			return err
		}
		sp := api.SimulationPolicy{Name: read.Name, Settings: map[string]string{}}
		for _, s := range read.Settings {
			sp.Settings[s.Key] = s.Value
		}
		req.Policies = append(req.Policies, sp)
	}
	res, err := c.Simulate(ctx, req)
	if err != nil {
		return err
	}
	var table strings.Builder
	if err := report.Table(&table, res.Results); err != nil {
		return err
	}
	p.Table, p.LeftOut = table.String(), res.LeftOut
	// An image, not inline SVG: nothing in it runs, whatever the policies
	// are named.
	p.Plot = template.URL("data:image/svg+xml;base64," + base64.StdEncoding.EncodeToString([]byte(res.Plot)))
	return nil
}
