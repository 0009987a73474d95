package cli

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/internal/apidoc"
	"github.com/gantry-dev/gantry/spec"
	"github.com/spf13/cobra"
)

// apiDocJSON is the API types' doc comments (internal/apidoc over api/),
// checked against the source by TestExplainDocsAreCurrent.
//
//go:embed apidoc.json
var apiDocJSON []byte

// explainKinds are the kinds explain knows, by the name it is asked for.
func explainKinds() map[string]reflect.Type {
	return map[string]reflect.Type{
		"cluster": reflect.TypeFor[api.Cluster](), "service": reflect.TypeFor[api.Service](),
		"secret": reflect.TypeFor[api.Secret](), "failovergroup": reflect.TypeFor[api.FailoverGroup](),
		"machine": reflect.TypeFor[api.Machine](), "replica": reflect.TypeFor[api.Replica](),
	}
}

func newExplainCmd(g *globals) *cobra.Command {
	var recursive bool
	cmd := &cobra.Command{
		Use:   "explain KIND[.FIELD...]",
		Short: "Say what a kind's fields mean, from the API types' own documentation (offline)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var docs apidoc.Docs
			if err := json.Unmarshal(apiDocJSON, &docs); err != nil {
				return fmt.Errorf("explain's documentation: %w", err)
			}
			return explain(g.out, docs, args[0], recursive)
		},
	}
	cmd.Flags().BoolVar(&recursive, "recursive", false, "list every field below, nested, without descriptions")
	return cmd
}

// explain prints what path (kind.field.field…) is, and its fields.
func explain(w io.Writer, docs apidoc.Docs, path string, recursive bool) error {
	parts := strings.Split(strings.ToLower(path), ".")
	kinds := explainKinds()
	name := strings.TrimSuffix(parts[0], "s")
	if kind, err := canonicalKind(parts[0]); err == nil {
		name = singular(kind)
	}
	t, ok := kinds[name]
	if !ok {
		return fmt.Errorf("explain %q: no kind %q (want cluster, service, secret, failovergroup, machine or replica)", path, parts[0])
	}
	kindName := t.Name()
	doc := docs[t.Name()]
	walked := []string{}
	for _, p := range parts[1:] {
		f, ok := fieldByJSON(t, p)
		if !ok {
			hint := ""
			if near := spec.Nearest(p, jsonFields(t)); near != "" {
				hint = fmt.Sprintf(" (did you mean %q?)", near)
			}
			return fmt.Errorf("explain %q: %s has no field %q%s (fields: %s)", path, strings.Join(append([]string{name}, walked...), "."), p, hint, strings.Join(jsonFields(t), ", "))
		}
		doc = docs[structOf(t).Name()+"."+f.Name]
		walked = append(walked, p)
		t = f.Type
	}
	fmt.Fprintf(w, "KIND:     %s\n", kindName)
	if len(walked) > 0 {
		fmt.Fprintf(w, "FIELD:    %s <%s>\n", strings.Join(walked, "."), typeName(t))
	}
	st := structOf(t)
	if doc == "" && st != nil {
		doc = docs[st.Name()] // the field's type says what it is
	}
	fmt.Fprintf(w, "\nDESCRIPTION:\n%s\n", indentText(orText(doc, "(no description)"), "    "))
	if st == nil {
		return nil
	}
	fmt.Fprintln(w, "\nFIELDS:")
	if recursive {
		printFieldTree(w, st, "   ", map[reflect.Type]bool{})
		return nil
	}
	for _, f := range fieldsOf(st) {
		fmt.Fprintf(w, "   %s\t<%s>%s\n", f.json, typeName(f.field.Type), f.note())
		d := docs[st.Name()+"."+f.field.Name]
		if inner := structOf(f.field.Type); d == "" && inner != nil {
			d = docs[inner.Name()]
		}
		if d != "" {
			fmt.Fprintln(w, indentText(d, "     "))
		}
		fmt.Fprintln(w)
	}
	return nil
}

// jsonField is a struct field under its JSON name.
type jsonField struct {
	json   string
	field  reflect.StructField
	output bool
}

func (f jsonField) note() string {
	if f.output {
		return " (set by Gantry)"
	}
	return ""
}

func fieldsOf(t reflect.Type) []jsonField {
	var out []jsonField
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		out = append(out, jsonField{json: name, field: f, output: f.Tag.Get("gantry") == "output"})
	}
	return out
}

func jsonFields(t reflect.Type) []string {
	var out []string
	if st := structOf(t); st != nil {
		for _, f := range fieldsOf(st) {
			out = append(out, f.json)
		}
	}
	sort.Strings(out)
	return out
}

func fieldByJSON(t reflect.Type, name string) (reflect.StructField, bool) {
	st := structOf(t)
	if st == nil {
		return reflect.StructField{}, false
	}
	for _, f := range fieldsOf(st) {
		if strings.EqualFold(f.json, name) {
			return f.field, true
		}
	}
	return reflect.StructField{}, false
}

// structOf is the struct a field holds (through pointers, slices and
// maps), nil for scalars and times.
func structOf(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || t == reflect.TypeFor[time.Time]() {
		return nil
	}
	return t
}

// typeName is a field's type as explain prints it: string, integer,
// []Port, map[string]string, Object.
func typeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Pointer:
		return typeName(t.Elem())
	case reflect.Slice:
		return "[]" + typeName(t.Elem())
	case reflect.Map:
		return "map[string]" + typeName(t.Elem())
	case reflect.String:
		return "string"
	case reflect.Int, reflect.Int64, reflect.Int32:
		return "integer"
	case reflect.Float64, reflect.Float32:
		return "number"
	case reflect.Bool:
		return "boolean"
	case reflect.Struct:
		if t == reflect.TypeFor[time.Time]() {
			return "time"
		}
		return t.Name()
	}
	return t.String()
}

// printFieldTree prints every field below t, nested by indentation.
func printFieldTree(w io.Writer, t reflect.Type, indent string, seen map[reflect.Type]bool) {
	if seen[t] {
		return
	}
	seen[t] = true
	defer delete(seen, t)
	for _, f := range fieldsOf(t) {
		fmt.Fprintf(w, "%s%s\t<%s>%s\n", indent, f.json, typeName(f.field.Type), f.note())
		if st := structOf(f.field.Type); st != nil {
			printFieldTree(w, st, indent+"   ", seen)
		}
	}
}

func indentText(text, indent string) string {
	var lines []string
	line := indent
	for _, word := range strings.Fields(text) {
		if len(line)+len(word) > 78 && strings.TrimSpace(line) != "" {
			lines = append(lines, strings.TrimRight(line, " "))
			line = indent
		}
		line += word + " "
	}
	return strings.Join(append(lines, strings.TrimRight(line, " ")), "\n")
}

func orText(s, fallback string) string {
	if s == "" {
		return fallback
	}
	return s
}
