// Package cli holds the cobra commands of the gantry binary.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/gantry-dev/gantry/client"
	"github.com/gantry-dev/gantry/internal/pki"
	"github.com/gantry-dev/gantry/internal/version"
	"github.com/gantry-dev/gantry/server"
	"github.com/spf13/cobra"
)

// globals are the flags every client command shares.
type globals struct {
	server    string
	token     string
	tokenFile string
	caCert    string
	dataDir   string
	timeout   time.Duration
	out       io.Writer
	errOut    io.Writer
}

// Execute runs the CLI and returns the process exit code.
func Execute(args []string, stdout, stderr io.Writer) int {
	g := &globals{out: stdout, errOut: stderr}
	root := newRoot(g)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := root.ExecuteContext(ctx); err != nil {
		return printError(stderr, root, err)
	}
	return 0
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", "; ")), " ")
}

func newRoot(g *globals) *cobra.Command {
	root := &cobra.Command{
		Use:           "gantry",
		Short:         "Gantry runs containers on machines it provisions itself",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version.Get().String(),
	}
	root.SetVersionTemplate("gantry {{.Version}}\n")
	pf := root.PersistentFlags()
	pf.StringVar(&g.server, "server", os.Getenv("GANTRY_SERVER"), "API URL (default: $GANTRY_SERVER, else ./.gantry/server.url, else http://127.0.0.1:7400)")
	pf.StringVar(&g.token, "token", "", "admin token (default: $GANTRY_TOKEN, else the --token-file)")
	pf.StringVar(&g.tokenFile, "token-file", "", "file holding the admin token (default: <data-dir>/admin-token)")
	pf.StringVar(&g.caCert, "ca-cert", os.Getenv("GANTRY_CA_CERT"), "CA certificate an HTTPS server is verified with (default: $GANTRY_CA_CERT, else <data-dir>/ca.crt when present, else the system's roots)")
	pf.StringVar(&g.dataDir, "data-dir", ".gantry", "directory of the server's state (dev and server) and where the CLI looks for server.url and admin-token")
	pf.DurationVar(&g.timeout, "request-timeout", 30*time.Second, "timeout of each API request")
	root.AddCommand(
		newVersionCmd(g), newValidateCmd(g), newApplyCmd(g), newGetCmd(g), newDescribeCmd(g), newDeleteCmd(g),
		newJoinTokenCmd(g), newTokenCmd(g), newSecretCmd(g), newPlanCmd(g), newDrainCmd(g), newCordonCmd(g, true), newCordonCmd(g, false), newDiffCmd(g), newRolloutCmd(g), newScaleCmd(g), newServerCmd(g), newAgentCmd(g), newDevCmd(g), newHelloCmd(g), newImageCmd(g), newLogsCmd(g), newMemberCmd(g), newFailoverCmd(g), newExplainCmd(g), newSimulateCmd(g), newTraceCmd(g), newExecCmd(g), newPortForwardCmd(g), newTopCmd(g),
	)
	attachExamples(root)
	markUsageErrors(root)
	return root
}

// client builds an API client from flags, environment and the data dir.
func (g *globals) client() (*client.Client, error) {
	server := g.server
	if server == "" {
		if data, err := os.ReadFile(filepath.Join(g.dataDir, "server.url")); err == nil {
			server = strings.TrimSpace(string(data))
		} else {
			server = "http://127.0.0.1:7400"
		}
	}
	token := g.token
	if token == "" {
		token = os.Getenv("GANTRY_TOKEN")
	}
	if token == "" {
		path := g.tokenFile
		if path == "" {
			path = filepath.Join(g.dataDir, "admin-token")
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("no admin token: set GANTRY_TOKEN or --token-file (reading %s: %w)", path, errors.Unwrap(err))
		}
		token = strings.TrimSpace(string(data))
	}
	httpClient, err := g.httpClient()
	if err != nil {
		return nil, err
	}
	return client.New(server, token, httpClient), nil
}

// httpClient trusts --ca-cert, else the data dir's CA, else the system's.
func (g *globals) httpClient() (*http.Client, error) {
	path := g.caCert
	if path == "" {
		if _, err := os.Stat(server.CACertPath(g.dataDir)); err == nil {
			path = server.CACertPath(g.dataDir)
		}
	}
	c := &http.Client{Timeout: g.timeout}
	if path == "" {
		return c, nil
	}
	caPEM, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--ca-cert: %w", err)
	}
	tlsCfg, err := pki.PoolClientConfig(caPEM)
	if err != nil {
		return nil, fmt.Errorf("--ca-cert %s: %w", path, err)
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = tlsCfg
	c.Transport = t
	return c, nil
}

func newVersionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Fprintln(g.out, "Client: gantry", version.Get())
			c, err := g.client()
			if err != nil {
				fmt.Fprintln(g.out, "Server: unknown (", oneLine(err.Error()), ")")
				return nil
			}
			h, err := c.Health(cmd.Context())
			if err != nil {
				fmt.Fprintf(g.out, "Server: not reached at %s (%s)\n", c.BaseURL(), oneLine(err.Error()))
				return nil
			}
			fmt.Fprintf(g.out, "Server: gantry %s at %s\n", version.Info{Version: h.Version, Commit: h.Commit}, c.BaseURL())
			return nil
		},
	}
}
