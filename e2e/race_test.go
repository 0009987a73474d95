//go:build race

package e2e

// Under `go test -race`, the server and agents run race-instrumented too.
func init() { buildFlags = append(buildFlags, "-race") }
