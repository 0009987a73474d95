// Package trace reads the demand traces `gantry simulate` replays: how many
// replicas each service wants, from when on, and optionally what each asks
// for. The documented form is a CSV (ReadCSV); adapters turn public traces
// into the same rows. A trace is checked whole before any simulation runs:
// a bad row is refused with its line named, and nothing is simulated.
package trace

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/api"
)

// Row is one change of demand: from At on, Service wants Replicas
// replicas. Requests, when set, is what each asks for from then on
// (fields left zero keep the spec's).
type Row struct {
	// Line is the row's line in its file (1 is the header).
	Line     int
	At       time.Time
	Service  string
	Replicas int
	Requests Override
}

// Override is a row's per-replica requests; a nil field keeps the spec's.
type Override struct {
	MilliCPU    *int64
	MemoryBytes *int64
	GPUs        *int
}

// Trace is a whole trace, its rows in time order.
type Trace struct {
	Rows []Row
}

// Start and End are the first and last rows' times.
func (t Trace) Start() time.Time { return t.Rows[0].At }
func (t Trace) End() time.Time   { return t.Rows[len(t.Rows)-1].At }

// Services are the services the rows name, sorted.
func (t Trace) Services() []string {
	seen := map[string]bool{}
	for _, row := range t.Rows {
		seen[row.Service] = true
	}
	return slices.Sorted(maps.Keys(seen))
}

// Names are the services' names, the set a trace's rows may name.
func Names(services []*api.Service) map[string]bool {
	known := make(map[string]bool, len(services))
	for _, s := range services {
		known[s.Metadata.Name] = true
	}
	return known
}

// Columns of the CSV form: the first three are required, in any order.
const (
	ColumnTime     = "time"
	ColumnService  = "service"
	ColumnReplicas = "replicas"
	ColumnCPU      = "cpu"
	ColumnMemory   = "memory"
	ColumnGPU      = "gpu"
)

// maxErrors is how many bad rows one error lists.
const maxErrors = 10

// ReadCSV reads the CSV form: a header naming the columns time, service,
// replicas and optionally cpu (as in a spec: 500m, 2), memory (512Mi, 2Gi)
// and gpu (a count); then a row per change. Times are RFC 3339 with a zone
// (2026-11-01T00:00:00Z, or an offset). services are the spec's: a row
// naming another is refused. Rows must be in time order, and a service
// may change once per instant.
func ReadCSV(r io.Reader, services map[string]bool) (Trace, error) {
	cr := csv.NewReader(r)
	cr.TrimLeadingSpace = true
	cr.ReuseRecord = true
	header, err := cr.Read()
	if err != nil {
		return Trace{}, fmt.Errorf("trace: reading the header: %w", err)
	}
	cols, err := columnsOf(header)
	if err != nil {
		return Trace{}, err
	}
	var rows []Row
	err = eachRecord(cr, 2, "trace", func(line int, record []string) error {
		row, err := cols.row(line, record, services)
		if err == nil {
			rows = append(rows, row)
		}
		return err
	})
	t := Trace{Rows: rows}
	if err == nil {
		if bad := t.checkOrder(); len(bad) > 0 {
			err = fmt.Errorf("trace refused, nothing simulated: %w", errors.Join(bad...))
		}
	}
	if err != nil {
		return Trace{}, err
	}
	if len(rows) == 0 {
		return Trace{}, errors.New("trace: no rows after the header")
	}
	return t, nil
}

// eachRecord hands row each record from line first on. A record row
// refuses is noted and the rest read on, up to maxErrors: the error is
// every one refused (what names the table), or what CSV could not read.
func eachRecord(cr *csv.Reader, first int, what string, row func(line int, record []string) error) error {
	var bad []error
	for line := first; ; line++ {
		record, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("%s: line %d: %w", what, line, err)
		}
		if err := row(line, record); err != nil {
			if bad = append(bad, err); len(bad) == maxErrors {
				break
			}
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%s refused, nothing simulated: %w", what, errors.Join(bad...))
	}
	return nil
}

// columns are the header's column positions (-1: absent).
type columns struct {
	time, service, replicas, cpu, memory, gpu int
}

func columnsOf(header []string) (columns, error) {
	c := columns{-1, -1, -1, -1, -1, -1}
	at := map[string]*int{ColumnTime: &c.time, ColumnService: &c.service, ColumnReplicas: &c.replicas,
		ColumnCPU: &c.cpu, ColumnMemory: &c.memory, ColumnGPU: &c.gpu}
	for i, name := range header {
		name = strings.ToLower(strings.TrimSpace(name))
		p, ok := at[name]
		switch {
		case !ok:
			return c, fmt.Errorf("trace: line 1: unknown column %q (the columns are time, service, replicas, cpu, memory, gpu)", header[i])
		case *p >= 0:
			return c, fmt.Errorf("trace: line 1: column %q twice", name)
		}
		*p = i
	}
	for _, req := range []struct {
		name string
		at   int
	}{{ColumnTime, c.time}, {ColumnService, c.service}, {ColumnReplicas, c.replicas}} {
		if req.at < 0 {
			return c, fmt.Errorf("trace: line 1: the column %q is missing", req.name)
		}
	}
	return c, nil
}

// row parses one record.
func (c columns) row(line int, record []string, services map[string]bool) (Row, error) {
	field := func(i int) string {
		if i < 0 || i >= len(record) {
			return ""
		}
		return strings.TrimSpace(record[i])
	}
	fail := func(format string, a ...any) (Row, error) {
		return Row{}, fmt.Errorf("line %d: "+format, append([]any{line}, a...)...)
	}
	at, err := ParseTime(field(c.time))
	if err != nil {
		return fail("time: %v", err)
	}
	svc := field(c.service)
	if !services[svc] {
		return fail("service %q is not in the spec", svc)
	}
	n, err := strconv.Atoi(field(c.replicas))
	if err != nil || n < 0 {
		return fail("replicas %q: want a count of 0 or more", field(c.replicas))
	}
	row := Row{Line: line, At: at, Service: svc, Replicas: n}
	if s := field(c.cpu); s != "" {
		v, err := api.ParseCPU(s)
		if err != nil || v <= 0 {
			return fail("cpu %q: want a quantity above 0 (500m, 2)", s)
		}
		row.Requests.MilliCPU = &v
	}
	if s := field(c.memory); s != "" {
		v, err := api.ParseBytes(s)
		if err != nil || v <= 0 {
			return fail("memory %q: want a quantity above 0 (512Mi, 2Gi)", s)
		}
		row.Requests.MemoryBytes = &v
	}
	if s := field(c.gpu); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 0 {
			return fail("gpu %q: want a count of 0 or more", s)
		}
		row.Requests.GPUs = &v
	}
	return row, nil
}

// ParseTime reads an RFC 3339 time; one without a zone is refused (which
// zone was meant cannot be known).
func ParseTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, errors.New("empty")
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err == nil {
		return t.UTC(), nil
	}
	for _, layout := range []string{"2006-01-02T15:04:05", "2006-01-02 15:04:05", "2006-01-02T15:04", "2006-01-02"} {
		if _, err := time.Parse(layout, s); err == nil {
			return time.Time{}, fmt.Errorf("%q has no time zone (write it as 2026-11-01T00:00:00Z, or with an offset)", s)
		}
	}
	return time.Time{}, fmt.Errorf("%q is not an RFC 3339 time (2026-11-01T00:00:00Z)", s)
}

// checkOrder refuses rows out of time order and a service changed twice
// at one instant.
func (t Trace) checkOrder() []error {
	var bad []error
	seen := map[string]int{} // service at the current instant → its line
	for i, r := range t.Rows {
		if i > 0 {
			prev := t.Rows[i-1]
			if r.At.Before(prev.At) {
				bad = append(bad, fmt.Errorf("line %d: time %s is before line %d's %s (rows must be in time order)", r.Line, r.At.Format(time.RFC3339), prev.Line, prev.At.Format(time.RFC3339)))
			}
			if !r.At.Equal(prev.At) {
				clear(seen)
			}
		}
		if line, ok := seen[r.Service]; ok {
			bad = append(bad, fmt.Errorf("line %d: service %q already changes at %s (line %d)", r.Line, r.Service, r.At.Format(time.RFC3339), line))
		}
		seen[r.Service] = r.Line
		if len(bad) == maxErrors {
			break
		}
	}
	return bad
}
