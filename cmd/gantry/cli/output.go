package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	yaml "go.yaml.in/yaml/v3"
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
)

func checkFormat(f string) error {
	switch f {
	case formatTable, formatWide, formatJSON, formatYAML, formatName:
		return nil
	}
	if strings.HasPrefix(f, formatJSONPath) && len(f) > len(formatJSONPath) {
		return nil
	}
	return fmt.Errorf("--output %q: want table, wide, json, yaml, name or jsonpath=TEMPLATE", f)
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
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) print(w io.Writer, wide bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	n := len(t.header)
	header := t.header
	if wide {
		header = append(append([]string{}, t.header...), t.wide...)
		n = len(header)
	}
	if !t.noHeader {
		fmt.Fprintln(tw, strings.Join(header, "\t"))
	}
	for _, r := range t.rows {
		if len(r) > n {
			r = r[:n]
		}
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

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
