package decide

import (
	"reflect"
	"testing"
)

// Every field of Memory is a section, under its tag's name, in order:
// a field left out would be neither copied, nor written, nor read back.
func TestMemorySectionsAreMemorysFields(t *testing.T) {
	fields := reflect.TypeFor[Memory]()
	sections := memorySections()
	if len(sections) != fields.NumField() {
		t.Fatalf("%d sections for %d fields of Memory", len(sections), fields.NumField())
	}
	for i, sec := range sections {
		f := fields.Field(i)
		if sec.name != f.Tag.Get("memory") {
			t.Fatalf("section %d is %q, field %s is tagged %q", i, sec.name, f.Name, f.Tag.Get("memory"))
		}
		var m Memory
		sec.makeEmpty(&m)
		if got := reflect.ValueOf(m).Field(i); got.IsNil() {
			t.Fatalf("section %q makes no map in field %s", sec.name, f.Name)
		}
	}
}
