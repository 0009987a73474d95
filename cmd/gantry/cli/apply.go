package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/client"
	"github.com/gantry-dev/gantry/provider/clouds"
	"github.com/gantry-dev/gantry/provider/local"
	"github.com/gantry-dev/gantry/provider/registry"
	"github.com/gantry-dev/gantry/server"
	"github.com/gantry-dev/gantry/spec"
	"github.com/spf13/cobra"
)

// describedProviders is every provider this gantry knows, described
// without instances: what validate and an offline plan check against.
func describedProviders() *registry.Registry {
	return registry.New(nil, append(server.BuiltinProviders(server.Instances{}), clouds.New(clouds.Config{}).Entries()...)...)
}

// checkedProviders are what apply and validate check a spec against
// before a server sees it: the described providers, except that local
// machines' runtime is left unknown (it is the server's --local-runtime),
// so an image on a local cluster is the server's to refuse or run.
func checkedProviders() spec.Providers { return localRuntimeUnknown{describedProviders()} }

type localRuntimeUnknown struct{ *registry.Registry }

func (p localRuntimeUnknown) Runtimes(provider string) []string {
	if provider == local.Name {
		return nil
	}
	return p.Registry.Runtimes(provider)
}

func readSpecFile(path string) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(os.Stdin)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return data, nil
}

func newValidateCmd(g *globals) *cobra.Command {
	var files []string
	cmd := &cobra.Command{
		Use:   "validate -f FILE",
		Short: "Check spec files offline (no server needed)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(files) == 0 {
				return fmt.Errorf("-f FILE is required")
			}
			for _, f := range files {
				data, err := readSpecFile(f)
				if err != nil {
					return err
				}
				docs, err := spec.Parse(f, data, checkedProviders())
				if err != nil {
					return err
				}
				for _, d := range docs {
					fmt.Fprintf(g.out, "%s: %s/%s is valid\n", f, kindLower(d.Kind()), d.Name())
				}
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "spec file (YAML or JSON; - for stdin); repeatable")
	return cmd
}

func newApplyCmd(g *globals) *cobra.Command {
	var files []string
	var wait bool
	var poll, timeout time.Duration
	cmd := &cobra.Command{
		Use:   "apply -f FILE|DIR [-f ...] [--wait]",
		Short: "Create or update the resources of spec files, all of them or none",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, res, err := sendSpecs(cmd.Context(), g, files, false)
			if err != nil {
				return err
			}
			printApplyResult(g.out, res)
			if !wait {
				return nil
			}
			return waitForServices(cmd.Context(), g, c, res, poll, timeout)
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "spec file or directory of them (YAML or JSON; - for stdin); repeatable")
	cmd.Flags().BoolVar(&wait, "wait", false, "follow the deployments of the services applied; fail if one fails")
	cmd.Flags().DurationVar(&poll, "poll-interval", time.Second, "how long --wait waits before it opens a broken watch of a deployment again")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "with --wait, give up on a deployment after this long (0: wait as long as it takes)")
	return cmd
}

// sendSpecs applies the files (dryRun: asks what applying would change);
// the server's errors name the files.
func sendSpecs(ctx context.Context, g *globals, files []string, dryRun bool) (*client.Client, *api.ApplyResult, error) {
	body, label, err := readSpecs(files)
	if err != nil {
		return nil, nil, err
	}
	c, err := g.client()
	if err != nil {
		return nil, nil, err
	}
	send := c.Apply
	if dryRun {
		send = c.DiffApply
	}
	res, err := send(ctx, body)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", label, err)
	}
	return c, res, nil
}

// readSpecs reads and checks every file (directories: their .yaml, .yml
// and .json files, in name order) before anything is sent, and joins
// them into one request so that they apply together or not at all. The
// label names the files, for the server's errors.
func readSpecs(files []string) (body []byte, label string, err error) {
	if len(files) == 0 {
		return nil, "", fmt.Errorf("-f FILE is required")
	}
	paths, err := expandSpecPaths(files)
	if err != nil {
		return nil, "", err
	}
	var parts [][]byte
	for _, f := range paths {
		data, err := readSpecFile(f)
		if err != nil {
			return nil, "", err
		}
		// Offline check first, so errors name the file.
		if _, err := spec.Parse(f, data, checkedProviders()); err != nil {
			return nil, "", err
		}
		parts = append(parts, data)
	}
	body, label = bytes.Join(parts, []byte("\n---\n")), strings.Join(paths, ", ")
	if len(parts) > 1 {
		if _, err := spec.Parse(label, body, checkedProviders()); err != nil {
			return nil, "", err
		}
	}
	return body, label, nil
}

func expandSpecPaths(files []string) ([]string, error) {
	var out []string
	for _, f := range files {
		info, err := os.Stat(f)
		if f == "-" || err == nil && !info.IsDir() {
			out = append(out, f)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", f, err)
		}
		entries, err := os.ReadDir(f)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", f, err)
		}
		n := len(out)
		for _, e := range entries {
			if ext := filepath.Ext(e.Name()); !e.IsDir() && (ext == ".yaml" || ext == ".yml" || ext == ".json") {
				out = append(out, filepath.Join(f, e.Name()))
			}
		}
		if len(out) == n {
			return nil, fmt.Errorf("%s: no .yaml, .yml or .json files", f)
		}
	}
	return out, nil
}

// waitForServices follows the deployment of every service applied.
func waitForServices(ctx context.Context, g *globals, c *client.Client, res *api.ApplyResult, poll, timeout time.Duration) error {
	var failed []string
	for _, item := range res.Results {
		if item.Kind != api.KindService {
			continue
		}
		svc, err := c.GetService(ctx, item.Name)
		if err != nil {
			return err
		}
		if err := newFollower(g, c, svc, poll).followFor(ctx, timeout); err != nil {
			if ctx.Err() != nil {
				return err
			}
			failed = append(failed, fmt.Sprintf("service/%s: %v", item.Name, err))
		}
	}
	if len(failed) > 0 {
		return errors.New(strings.Join(failed, "; "))
	}
	return nil
}

func printApplyResult(w io.Writer, res *api.ApplyResult) {
	for _, item := range res.Results {
		fmt.Fprintf(w, "%s/%s %s\n", kindLower(item.Kind), item.Name, item.Action)
		for _, ch := range item.Changes {
			fmt.Fprintf(w, "  %s\n", ch)
		}
	}
}

func kindLower(kind string) string {
	switch kind {
	case api.KindCluster:
		return "cluster"
	case api.KindService:
		return "service"
	case api.KindSecret:
		return "secret"
	case api.KindFailoverGroup:
		return "failovergroup"
	}
	return kind
}

func newJoinTokenCmd(g *globals) *cobra.Command {
	var req api.JoinTokenRequest
	cmd := &cobra.Command{
		Use:   "join-token --cluster NAME --group GROUP [--reusable N]",
		Short: "Mint a join token for a machine Gantry did not launch",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			res, err := c.CreateJoinToken(cmd.Context(), req)
			if err != nil {
				return err
			}
			fmt.Fprintln(g.out, res.Token)
			return nil
		},
	}
	cmd.Flags().StringVar(&req.Cluster, "cluster", "", "cluster the machine joins")
	cmd.Flags().StringVar(&req.Group, "group", "", "capacity group the machine belongs to")
	cmd.Flags().StringVar(&req.TTL, "ttl", "", "validity (default: the server's join token TTL)")
	cmd.Flags().IntVar(&req.Reusable, "reusable", 0, "machines the token may join (default 1; -1 for no limit until it expires)")
	return cmd
}
