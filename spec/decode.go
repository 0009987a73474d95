package spec

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/gantry-dev/gantry/api"
)

// decodeValue copies a generic YAML/JSON tree (maps, slices, scalars) into
// dst, rejecting unknown fields and wrong types with the field's path.
func decodeValue(path string, src any, dst reflect.Value, errs *ErrorList) {
	if src == nil {
		return // an explicit null leaves the zero value
	}
	switch dst.Kind() {
	case reflect.Pointer:
		v := reflect.New(dst.Type().Elem())
		decodeValue(path, src, v.Elem(), errs)
		dst.Set(v)
	case reflect.Struct:
		decodeStruct(path, src, dst, errs)
	case reflect.Slice:
		decodeSlice(path, src, dst, errs)
	case reflect.Map:
		decodeMap(path, src, dst, errs)
	case reflect.String:
		decodeString(path, src, dst, errs)
	case reflect.Int, reflect.Int64:
		decodeInt(path, src, dst, errs)
	case reflect.Float64:
		switch n := src.(type) {
		case int:
			dst.SetFloat(float64(n))
		case float64:
			dst.SetFloat(n)
		default:
			errs.add(path, "expected a number, got %s", describe(src))
		}
	case reflect.Bool:
		b, ok := src.(bool)
		if !ok {
			errs.add(path, "expected true or false, got %s", describe(src))
			return
		}
		dst.SetBool(b)
	default:
		errs.add(path, "cannot decode into %s", dst.Type())
	}
}

func decodeStruct(path string, src any, dst reflect.Value, errs *ErrorList) {
	m, ok := asMap(src)
	if !ok {
		errs.add(path, "expected an object, got %s", describe(src))
		return
	}
	if dst.Type() == reflect.TypeFor[api.ServiceSpec]() {
		splitEnvList(path, m, errs)
	}
	fields := structFields(dst.Type())
	keys := sortedKeys(m)
	for _, key := range keys {
		idx, known := fields[key]
		if !known {
			errs.add(childPath(path, key), "%s", unknownField(key, settableFields(dst.Type())))
			continue
		}
		if text, quoted := m[key].(string); quoted && stringOption(dst.Type().Field(idx)) {
			decodeQuotedInt(childPath(path, key), text, dst.Field(idx), errs)
			continue
		}
		decodeValue(childPath(path, key), m[key], dst.Field(idx), errs)
	}
}

// stringOption reports a field that JSON writes as a string (`,string`),
// such as metadata.resourceVersion: it reads back from one.
func stringOption(f reflect.StructField) bool {
	_, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
	return slices.Contains(strings.Split(opts, ","), "string")
}

func decodeQuotedInt(path, text string, dst reflect.Value, errs *ErrorList) {
	if dst.Kind() != reflect.Int64 && dst.Kind() != reflect.Int {
		errs.add(path, "cannot decode into %s", dst.Type())
		return
	}
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		errs.add(path, "expected an integer, got %s", describe(text))
		return
	}
	dst.SetInt(n)
}

func decodeSlice(path string, src any, dst reflect.Value, errs *ErrorList) {
	list, ok := src.([]any)
	if !ok {
		errs.add(path, "expected a list, got %s", describe(src))
		return
	}
	out := reflect.MakeSlice(dst.Type(), len(list), len(list))
	for i, item := range list {
		decodeValue(indexPath(path, i), item, out.Index(i), errs)
	}
	dst.Set(out)
}

func decodeMap(path string, src any, dst reflect.Value, errs *ErrorList) {
	m, ok := asMap(src)
	if !ok {
		errs.add(path, "expected an object, got %s", describe(src))
		return
	}
	out := reflect.MakeMapWithSize(dst.Type(), len(m))
	for _, key := range sortedKeys(m) {
		v := reflect.New(dst.Type().Elem()).Elem()
		decodeValue(childPath(path, key), m[key], v, errs)
		out.SetMapIndex(reflect.ValueOf(key), v)
	}
	dst.Set(out)
}

// decodeString accepts numbers too (`cpu: 2`, `PORT: 8080`), since YAML
// operators rarely quote them; booleans are refused to avoid the yes/no trap.
func decodeString(path string, src any, dst reflect.Value, errs *ErrorList) {
	switch s := src.(type) {
	case string:
		dst.SetString(s)
	case int:
		dst.SetString(strconv.Itoa(s))
	case float64:
		dst.SetString(strconv.FormatFloat(s, 'f', -1, 64))
	default:
		errs.add(path, "expected a string, got %s", describe(src))
	}
}

func decodeInt(path string, src any, dst reflect.Value, errs *ErrorList) {
	switch n := src.(type) {
	case int:
		dst.SetInt(int64(n))
	case float64:
		if n != math.Trunc(n) || math.Abs(n) > 1<<53 {
			errs.add(path, "expected an integer, got %v", n)
			return
		}
		dst.SetInt(int64(n))
	default:
		errs.add(path, "expected an integer, got %s", describe(src))
	}
}

func asMap(src any) (map[string]any, bool) {
	switch m := src.(type) {
	case map[string]any:
		return m, true
	case map[any]any:
		out := make(map[string]any, len(m))
		for k, v := range m {
			out[fmt.Sprint(k)] = v
		}
		return out, true
	}
	return nil, false
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// structFields maps JSON names to field indexes.
func structFields(t reflect.Type) map[string]int {
	fields := make(map[string]int, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			fields[name] = i
		}
	}
	return fields
}

// settableFields are the JSON names of t's fields an operator writes,
// sorted: not those Gantry fills in itself (tagged `gantry:"output"`),
// which are accepted back from `gantry get -o yaml` but never offered.
func settableFields(t reflect.Type) []string {
	var names []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "" && name != "-" && f.Tag.Get("gantry") != "output" {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// unknownField says that key is no field, offering the nearest of valid
// when it is a likely typo.
func unknownField(key string, valid []string) string {
	msg := "unknown field"
	if near := Nearest(key, valid); near != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", near)
	}
	return msg + " (expected one of: " + strings.Join(valid, ", ") + ")"
}

func describe(v any) string {
	switch x := v.(type) {
	case string:
		return fmt.Sprintf("string %q", x)
	case int, float64:
		return fmt.Sprintf("number %v", x)
	case bool:
		return fmt.Sprintf("boolean %v", x)
	case []any:
		return "a list"
	case map[string]any, map[any]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}
