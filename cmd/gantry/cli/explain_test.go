package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/internal/apidoc"
)

// The documentation explain embeds is the API types' comments as they
// are in the source. Regenerate with GANTRY_UPDATE_APIDOC=1 go test
// ./cmd/gantry/cli -run ExplainDocs.
func TestExplainDocsAreCurrent(t *testing.T) {
	docs, err := apidoc.Extract("../../../api")
	if err != nil {
		t.Fatal(err)
	}
	want, err := json.MarshalIndent(docs, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, '\n')
	if os.Getenv("GANTRY_UPDATE_APIDOC") == "1" {
		if err := os.WriteFile("apidoc.json", want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(apiDocJSON, want) && os.Getenv("GANTRY_UPDATE_APIDOC") != "1" {
		t.Fatal("cmd/gantry/cli/apidoc.json is stale: run GANTRY_UPDATE_APIDOC=1 go test ./cmd/gantry/cli -run ExplainDocs")
	}
}

func TestExplainSaysWhatAFieldIs(t *testing.T) {
	var docs apidoc.Docs
	if err := json.Unmarshal(apiDocJSON, &docs); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := explain(&out, docs, "service.spec.update", false); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"KIND:     Service", "FIELD:    spec.update <UpdatePolicy>", "maxSurge\t<integer>", "how many replicas above the desired count", "drainSeconds"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("explain service.spec.update lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := explain(&out, docs, "svc.spec", false); err != nil || !strings.Contains(out.String(), "restartedAt\t<string> (set by Gantry)") {
		t.Errorf("explain svc.spec (the short name, an output field marked): %v\n%s", err, out.String())
	}
	out.Reset()
	if err := explain(&out, docs, "cluster", true); err != nil || !strings.Contains(out.String(), "      groupId\t<string>") {
		t.Errorf("explain cluster --recursive: %v\n%s", err, out.String())
	}
	err := explain(&out, docs, "service.spec.replcas", false)
	if err == nil || !strings.Contains(err.Error(), `did you mean "replicas"?`) {
		t.Errorf("a misspelt field: %v", err)
	}
	if err := explain(&out, docs, "pod", false); err == nil || !strings.Contains(err.Error(), `no kind "pod"`) {
		t.Errorf("an unknown kind: %v", err)
	}
}
