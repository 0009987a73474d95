package report

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"encoding/xml"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/sim"
)

func results() []sim.Result {
	start := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	series := func(cost float64) []sim.Point {
		var out []sim.Point
		for i := 0; i < 24; i++ {
			out = append(out, sim.Point{At: start.Add(time.Duration(i) * time.Hour), CostPerHour: cost + float64(i%5), BoundPerHour: cost - 1, Pending: float64(i % 3), Machines: 4})
		}
		return out
	}
	return []sim.Result{
		{Policy: "on-demand", Settings: []string{"capacity-type=onDemand"}, Start: start, End: start.Add(24 * time.Hour), Cost: 96, Bound: 80, Gap: 0.2,
			MachineHours: []sim.TypeHours{{InstanceType: "m5.large", CapacityType: "onDemand", Machines: 5, Hours: 96, Cost: 96}},
			Pending:      sim.Percentiles{Count: 10, P50: 70 * time.Second, P99: 100 * time.Second, Max: 2 * time.Minute},
			Disruptions:  sim.Disruptions{Terminations: map[string]int{"drained": 3}, Launches: 5}, Series: series(4)},
		{Policy: "spot", Start: start, End: start.Add(24 * time.Hour), Cost: 40, Bound: 30, Gap: 1.0 / 3,
			MachineHours: []sim.TypeHours{{InstanceType: "m5.large", CapacityType: "spot", Machines: 7, Hours: 100, Cost: 40}},
			Spot:         sim.Spot{Interruptions: 2, Pending: sim.Percentiles{Count: 4, P50: time.Minute, Max: 90 * time.Second}},
			Series:       series(2)},
	}
}

// The table has a column per policy and the figures of each.
func TestTableSideBySide(t *testing.T) {
	var out bytes.Buffer
	if err := Table(&out, results()); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{"on-demand", "spot", "96.00", "40.00", "20.0%", "33.3%", "1m10s / 1m40s / 2m0s", "drained 3", "1m0s / 1m30s",
		"capacity-type=onDemand", "spot: defaults", "m5.large  onDemand  96.0       0.0"} {
		if !strings.Contains(text, want) {
			t.Errorf("the table lacks %q:\n%s", want, text)
		}
	}
}

// CSV is the series, a row per policy and bucket; JSON is the results
// whole.
func TestCSVAndJSON(t *testing.T) {
	var out bytes.Buffer
	if err := CSV(&out, results()); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&out).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1+2*24 || rows[0][0] != "policy" || rows[1][0] != "on-demand" || rows[25][0] != "spot" || rows[1][2] != "4.0000" {
		t.Fatalf("rows: %d, first %v, second %v", len(rows), rows[0], rows[1])
	}
	out.Reset()
	if err := JSON(&out, results()); err != nil {
		t.Fatal(err)
	}
	var back struct{ Results []sim.Result }
	if err := json.Unmarshal(out.Bytes(), &back); err != nil || len(back.Results) != 2 || back.Results[1].Spot.Interruptions != 2 {
		t.Fatalf("json: %v %+v", err, back)
	}
}

// The plot is SVG naming every policy in its legends.
func TestPlotIsSVG(t *testing.T) {
	var out bytes.Buffer
	if err := Plot(&out, results()); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(out.Bytes()))
	var texts []string
	root := ""
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the plot is not XML: %v", err)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = el.Name.Local
			}
		case xml.CharData:
			texts = append(texts, string(el))
		}
	}
	all := strings.Join(texts, "|")
	if root != "svg" || !strings.Contains(all, "on-demand") || !strings.Contains(all, "spot") || !strings.Contains(all, "Replicas waiting") {
		t.Fatalf("root %q, texts %s", root, all)
	}
}
