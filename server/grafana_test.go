package server

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/metrics"
)

// TestGrafanaDashboardQueriesExist: every metric docs/grafana/gantry.json
// queries is one the server exports (a histogram's _bucket, _sum and
// _count series count as the histogram).
func TestGrafanaDashboardQueriesExist(t *testing.T) {
	raw, err := os.ReadFile("../docs/grafana/gantry.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil || dash.Title == "" || len(dash.Panels) == 0 {
		t.Fatalf("docs/grafana/gantry.json is not a Grafana dashboard: %v", err)
	}
	ts := startServer(t, nil)
	if _, err := ts.admin.ListClusters(context.Background()); err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{}
	for _, name := range metrics.Names(ts.metrics.Collectors()...) {
		exported[name] = true
	}
	families, err := ts.promReg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		exported[f.GetName()] = true
	}
	metricName := regexp.MustCompile(`\b(gantry|go|process)_[a-z0-9_]+\b`)
	queried := 0
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, target := range p.Targets {
			for _, name := range metricName.FindAllString(target.Expr, -1) {
				queried++
				base := name
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					if trimmed, ok := strings.CutSuffix(name, suffix); ok && exported[trimmed] {
						base = trimmed
					}
				}
				if !exported[base] {
					t.Errorf("panel %q queries %s, which the server does not export", p.Title, name)
				}
			}
		}
	}
	if queried == 0 {
		t.Fatal("the dashboard queries no metric")
	}
}
