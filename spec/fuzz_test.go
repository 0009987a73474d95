package spec

import "testing"

// FuzzParse: no input makes the parser panic, and whatever it accepts
// validates again to no error (parse is idempotent on its own output).
func FuzzParse(f *testing.F) {
	f.Add([]byte(baseCluster))
	f.Add([]byte(baseService))
	f.Add([]byte(baseCluster + "---\n" + baseService))
	f.Add([]byte(`{"kind":"Service","metadata":{"name":"a"},"spec":{"cluster":"c","image":"i"}}`))
	f.Add([]byte("kind: Cluster\nspec: {capacityGroups: [{groupId: a, maxSize: 1e9}]}"))
	f.Add([]byte("- [\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		docs, err := Parse("fuzz.yaml", data, testCatalogs)
		if err != nil {
			return
		}
		for _, d := range docs {
			if errs := ValidateDocument(d, testCatalogs); errs != nil {
				t.Fatalf("accepted document fails validation: %v", errs)
			}
		}
	})
}
