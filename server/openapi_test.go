package server

import (
	"bytes"
	"os"
	"testing"

	"github.com/gantry-dev/gantry/internal/openapi"
)

// TestOpenAPIFileIsCurrent: server/openapi.json is what the generator makes
// from the api types. Regenerate with GANTRY_UPDATE_OPENAPI=1 go test ./server -run OpenAPIFile.
func TestOpenAPIFileIsCurrent(t *testing.T) {
	want := openapi.Document()
	if os.Getenv("GANTRY_UPDATE_OPENAPI") == "1" {
		if err := os.WriteFile("openapi.json", want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("server/openapi.json is stale: run GANTRY_UPDATE_OPENAPI=1 go test ./server -run OpenAPIFile")
	}
}
