package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gantry-dev/gantry/spec"
	yaml "go.yaml.in/yaml/v3"
	"k8s.io/client-go/util/jsonpath"
)

// Output formats of get.
const (
	formatTable = "table"
	formatWide  = "wide"
	formatJSON  = "json"
	formatYAML  = "yaml"
	formatName  = "name"
	// formatJSONPath is followed by the template: jsonpath={.items[*].id}.
	formatJSONPath = "jsonpath="
	// formatCustomColumns is followed by HEADER:FIELD pairs:
	// custom-columns=NAME:.metadata.name,STATE:.state.
	formatCustomColumns = "custom-columns="
)

func checkFormat(f string) error {
	switch f {
	case formatTable, formatWide, formatJSON, formatYAML, formatName:
		return nil
	}
	if strings.HasPrefix(f, formatJSONPath) && len(f) > len(formatJSONPath) {
		return nil
	}
	if spec, ok := strings.CutPrefix(f, formatCustomColumns); ok {
		_, err := parseColumns(spec)
		return err
	}
	hint := ""
	if near := nearestFormat(f); near != "" {
		hint = fmt.Sprintf(" (did you mean %s?)", near)
	}
	return fmt.Errorf("--output %q%s: want table, wide, json, yaml, name, jsonpath=TEMPLATE or custom-columns=HEADER:FIELD,HEADER:FIELD", f, hint)
}

// nearestFormat is the format a mistyped -o was likely meant as.
func nearestFormat(f string) string {
	name, _, _ := strings.Cut(f, "=")
	for _, known := range []string{"jsonpath", "custom-columns"} {
		if spec.Nearest(name, []string{known}) != "" && strings.Contains(f, "=") {
			return known + "=" + f[len(name)+1:]
		}
	}
	return spec.Nearest(f, []string{formatTable, formatWide, formatJSON, formatYAML, formatName})
}

// column is one of -o custom-columns: a header and the JSONPath of its
// cells.
type column struct {
	header string
	path   *jsonpath.JSONPath
}

// parseColumns reads HEADER:FIELD,... (FIELD as .a.b or {.a.b}).
func parseColumns(text string) ([]column, error) {
	var out []column
	for _, part := range strings.Split(text, ",") {
		header, field, ok := strings.Cut(part, ":")
		if !ok || header == "" || field == "" {
			return nil, fmt.Errorf("-o custom-columns: %q: want HEADER:FIELD, such as NAME:.metadata.name", part)
		}
		if !strings.HasPrefix(field, "{") {
			field = "{" + field + "}"
		}
		jp := jsonpath.New(header).AllowMissingKeys(true)
		if err := jp.Parse(field); err != nil {
			return nil, fmt.Errorf("-o custom-columns: %s: %w", header, err)
		}
		out = append(out, column{header: header, path: jp})
	}
	return out, nil
}

// customColumns is the table of -o custom-columns over items ("<none>"
// where an item lacks the field, as kubectl prints).
func customColumns(text string, items []item) (*table, error) {
	cols, err := parseColumns(text)
	if err != nil {
		return nil, err
	}
	t := &table{}
	for _, c := range cols {
		t.header = append(t.header, c.header)
	}
	for _, it := range items {
		row := make([]string, len(cols))
		for i, c := range cols {
			var buf bytes.Buffer
			if err := c.path.Execute(&buf, it.tree); err != nil {
				return nil, fmt.Errorf("-o custom-columns: %s: %w", c.header, err)
			}
			row[i] = buf.String()
			if row[i] == "" {
				row[i] = "<none>"
			}
		}
		t.rows = append(t.rows, row)
	}
	return t, nil
}

// printStructured writes v as JSON or YAML with the API's field names.
func printStructured(w io.Writer, format string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if format == formatJSON {
		_, err = fmt.Fprintln(w, string(data))
		return err
	}
	tree, err := jsonTree(data)
	if err != nil {
		return err
	}
	out, err := yaml.Marshal(tree)
	if err != nil {
		return err
	}
	_, err = w.Write(out)
	return err
}

// jsonTree decodes JSON into maps and slices with integers kept
// integral (512Mi is 536870912, not 5.36870912e+08).
func jsonTree(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return nil, err
	}
	return numbersIn(tree), nil
}

// numbersIn turns json.Numbers into int64 (or float64 when fractional).
func numbersIn(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = numbersIn(e)
		}
	case []any:
		for i, e := range x {
			x[i] = numbersIn(e)
		}
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n
		}
		f, _ := x.Float64()
		return f
	}
	return v
}

// table prints aligned columns; wide columns are appended with -o wide.
type table struct {
	noHeader bool
	header   []string
	wide     []string
	rows     [][]string
	// sortKeys are figures rows sort by, beside them (top's cpu, memory).
	sortKeys [][2]int64
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) print(w io.Writer, wide bool) error {
	t.printWidths(w, wide, nil)
	return nil
}

// printWidths prints the table with each column at least as wide as
// before (widths, from an earlier print) and returns the widths used:
// rows printed later line up under the first header.
func (t *table) printWidths(w io.Writer, wide bool, before []int) []int {
	header := t.header
	if wide {
		header = append(append([]string{}, t.header...), t.wide...)
	}
	n := len(header)
	widths := make([]int, n)
	copy(widths, before)
	grow := func(cells []string) {
		for i, c := range cells[:min(n, len(cells))] {
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	if !t.noHeader {
		grow(header)
	}
	for _, r := range t.rows {
		grow(r)
	}
	line := func(cells []string) {
		var b strings.Builder
		cells = cells[:min(n, len(cells))]
		for i, c := range cells {
			b.WriteString(c)
			if i < len(cells)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c)+columnGap))
			}
		}
		fmt.Fprintln(w, b.String())
	}
	if !t.noHeader {
		line(header)
	}
	for _, r := range t.rows {
		line(r)
	}
	return widths
}

// columnGap is the space between a table's columns.
const columnGap = 3

// age renders a duration the way kubectl does.
func age(since time.Time) string {
	if since.IsZero() {
		return "-"
	}
	d := time.Since(since)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

func timePtr(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
