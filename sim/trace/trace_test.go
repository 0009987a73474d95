package trace

import (
	"strings"
	"testing"
	"time"
)

var specServices = map[string]bool{"web": true, "api": true}

func TestReadCSVReadsTheDocumentedForm(t *testing.T) {
	in := `time,service,replicas,cpu,memory,gpu
2026-11-01T00:00:00Z,web,3,,,
2026-11-01T00:00:00Z,api,2,500m,1Gi,
2026-11-01T01:30:00+01:00,web,5,2,,1
2026-11-01T02:00:00Z,api,0,,,
`
	tr, err := ReadCSV(strings.NewReader(in), specServices)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Rows) != 4 {
		t.Fatalf("%d rows, want 4", len(tr.Rows))
	}
	r := tr.Rows[1]
	if r.Line != 3 || r.Service != "api" || r.Replicas != 2 || *r.Requests.MilliCPU != 500 || *r.Requests.MemoryBytes != 1<<30 || r.Requests.GPUs != nil {
		t.Errorf("row 2: %+v", r)
	}
	if tr.Rows[0].Requests.MilliCPU != nil || tr.Rows[0].Requests.MemoryBytes != nil {
		t.Errorf("row 1 overrides what the spec says: %+v", tr.Rows[0].Requests)
	}
	w := tr.Rows[2]
	if !w.At.Equal(time.Date(2026, 11, 1, 0, 30, 0, 0, time.UTC)) || *w.Requests.MilliCPU != 2000 || *w.Requests.GPUs != 1 {
		t.Errorf("row 3: %+v (the offset +01:00 makes 00:30Z)", w)
	}
	if !tr.Start().Equal(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)) || !tr.End().Equal(time.Date(2026, 11, 1, 2, 0, 0, 0, time.UTC)) {
		t.Errorf("start %s, end %s", tr.Start(), tr.End())
	}
}

func TestReadCSVTakesColumnsInAnyOrder(t *testing.T) {
	in := "replicas,service,time\n4,web,2026-11-01T00:00:00Z\n"
	tr, err := ReadCSV(strings.NewReader(in), specServices)
	if err != nil || tr.Rows[0].Replicas != 4 || tr.Rows[0].Service != "web" {
		t.Fatalf("%+v, %v", tr, err)
	}
}

// Bad input is refused with the line (or column) named, before anything
// is simulated.
func TestReadCSVRefusesBadRows(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []string
	}{
		{"unknown service", "time,service,replicas\n2026-11-01T00:00:00Z,db,1\n", []string{"line 2", `service "db" is not in the spec`}},
		{"negative count", "time,service,replicas\n2026-11-01T00:00:00Z,web,-1\n", []string{"line 2", `replicas "-1"`}},
		{"not a count", "time,service,replicas\n2026-11-01T00:00:00Z,web,two\n", []string{"line 2", `replicas "two"`}},
		{"no zone", "time,service,replicas\n2026-11-01T00:00:00,web,1\n", []string{"line 2", "has no time zone"}},
		{"no zone, with a space", "time,service,replicas\n2026-11-01 00:00:00,web,1\n", []string{"line 2", "has no time zone"}},
		{"not a time", "time,service,replicas\nyesterday,web,1\n", []string{"line 2", "not an RFC 3339 time"}},
		{"unsorted", "time,service,replicas\n2026-11-01T01:00:00Z,web,1\n2026-11-01T00:00:00Z,api,1\n", []string{"line 3", "before line 2's", "time order"}},
		{"duplicate", "time,service,replicas\n2026-11-01T00:00:00Z,web,1\n2026-11-01T00:00:00Z,api,1\n2026-11-01T00:00:00Z,web,2\n", []string{"line 4", `service "web" already changes`, "(line 2)"}},
		{"bad cpu", "time,service,replicas,cpu\n2026-11-01T00:00:00Z,web,1,lots\n", []string{"line 2", `cpu "lots"`}},
		{"zero memory", "time,service,replicas,memory\n2026-11-01T00:00:00Z,web,1,0\n", []string{"line 2", `memory "0"`}},
		{"bad gpu", "time,service,replicas,gpu\n2026-11-01T00:00:00Z,web,1,-2\n", []string{"line 2", `gpu "-2"`}},
		{"unknown column", "time,service,replicas,zone\n", []string{"line 1", `unknown column "zone"`}},
		{"missing column", "time,service\n2026-11-01T00:00:00Z,web\n", []string{"line 1", `"replicas" is missing`}},
		{"column twice", "time,service,replicas,time\n", []string{"line 1", `"time" twice`}},
		{"no rows", "time,service,replicas\n", []string{"no rows"}},
		{"empty", "", []string{"header"}},
		{"ragged", "time,service,replicas\n2026-11-01T00:00:00Z,web\n", []string{"line 2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := ReadCSV(strings.NewReader(tc.in), specServices)
			if err == nil {
				t.Fatalf("accepted: %+v", tr)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if len(tr.Rows) != 0 {
				t.Errorf("a refused trace kept %d rows", len(tr.Rows))
			}
		})
	}
}

// Every bad row is named, not only the first (up to maxErrors).
func TestReadCSVNamesEveryBadRow(t *testing.T) {
	in := "time,service,replicas\n2026-11-01T00:00:00Z,db,1\n2026-11-01T00:01:00Z,web,1\n2026-11-01T00:02:00Z,web,-3\n"
	_, err := ReadCSV(strings.NewReader(in), specServices)
	if err == nil || !strings.Contains(err.Error(), "line 2") || !strings.Contains(err.Error(), "line 4") || strings.Contains(err.Error(), "line 3") {
		t.Fatalf("error %v: want lines 2 and 4 named, not 3", err)
	}
}
