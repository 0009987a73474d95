// Command gantry is Gantry's one binary: server, agent, CLI and dev mode.
package main

import (
	"os"

	"github.com/gantry-dev/gantry/cmd/gantry/cli"
)

func main() {
	os.Exit(cli.Execute(os.Args[1:], os.Stdout, os.Stderr))
}
