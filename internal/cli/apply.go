package cli

import (
	"fmt"
	"io"
	"os"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/provider/clouds"
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
				docs, err := spec.Parse(f, data, describedProviders())
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
	cmd := &cobra.Command{
		Use:   "apply -f FILE",
		Short: "Create or update the resources of spec files",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(files) == 0 {
				return fmt.Errorf("-f FILE is required")
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			for _, f := range files {
				data, err := readSpecFile(f)
				if err != nil {
					return err
				}
				// Offline check first, so errors name the file.
				if _, err := spec.Parse(f, data, describedProviders()); err != nil {
					return err
				}
				res, err := c.Apply(cmd.Context(), data)
				if err != nil {
					return fmt.Errorf("%s: %w", f, err)
				}
				printApplyResult(g.out, res)
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "spec file (YAML or JSON; - for stdin); repeatable")
	return cmd
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
	}
	return kind
}

func newJoinTokenCmd(g *globals) *cobra.Command {
	var req api.JoinTokenRequest
	cmd := &cobra.Command{
		Use:   "join-token --cluster NAME --group GROUP",
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
	return cmd
}
