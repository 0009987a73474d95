package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"

	"github.com/gantry-dev/gantry/api"
	dockerprovider "github.com/gantry-dev/gantry/provider/docker"
	"github.com/gantry-dev/gantry/runtime/docker"
	"github.com/gantry-dev/gantry/server"
	"github.com/gantry-dev/gantry/spec"
	"github.com/spf13/cobra"
)

func newImageCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "image", Short: "Container images of Gantry itself, built locally"}
	var tag, binary string
	build := &cobra.Command{
		Use:   "build",
		Short: "Build a FROM scratch image holding this gantry binary as /gantry (no registry needed)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if binary == "" {
				var err error
				if binary, err = os.Executable(); err != nil {
					return err
				}
			}
			cli, err := docker.NewClient("")
			if err != nil {
				return err
			}
			defer cli.Close()
			if err := docker.EnsureImage(cmd.Context(), cli, tag, binary); err != nil {
				return err
			}
			fmt.Fprintf(g.out, "image %s holds %s as %s\n", tag, binary, docker.BinaryPath)
			return nil
		},
	}
	build.Flags().StringVar(&tag, "tag", "gantry:dev", "image name")
	build.Flags().StringVar(&binary, "binary", "", "gantry binary to put in the image (default: this one)")
	cmd.AddCommand(build)
	return cmd
}

// devImage is the image the examples' replicas run (/gantry hello).
const devImage = "gantry:dev"

// withProvider rewrites every cluster of the spec to run on provider and
// returns the spec to apply.
func withProvider(docs []spec.Document, provider string) ([]byte, error) {
	var parts []string
	for _, d := range docs {
		var obj any = d.Service
		if d.Cluster != nil {
			d.Cluster.Spec.Provider.Name = provider
			obj = d.Cluster
		}
		data, err := json.Marshal(obj)
		if err != nil {
			return nil, err
		}
		parts = append(parts, string(data))
	}
	return []byte(strings.Join(parts, "\n---\n")), nil
}

func usesProvider(docs []spec.Document, provider string) bool {
	for _, d := range docs {
		if d.Cluster != nil && d.Cluster.Spec.Provider.Name == provider {
			return true
		}
	}
	return false
}

// prepareDocker readies this host's engine for docker machines: the
// network exists, the machine image and the workload image (the
// examples': gantry:dev) hold this binary, and the server
// listens where machine containers reach it (the network's gateway) rather
// than on loopback.
func prepareDocker(ctx context.Context, g *globals, cfg *server.Config, workloadImage string) error {
	cli, err := docker.NewClient(cfg.Docker.Host)
	if err != nil {
		return err
	}
	defer cli.Close()
	gateway, err := dockerprovider.EnsureNetwork(ctx, cli, cfg.Docker.Network)
	if err != nil {
		return fmt.Errorf("the docker provider needs a running Docker Engine: %w", err)
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	// The machine image, and the one the examples' replicas run.
	for _, tag := range slices.Compact([]string{cfg.Docker.Image, workloadImage}) {
		fmt.Fprintf(g.out, "gantry dev: image %s holds %s\n", tag, exe)
		if err := docker.EnsureImage(ctx, cli, tag, exe); err != nil {
			return err
		}
	}
	host, port, err := net.SplitHostPort(cfg.Listen)
	if err != nil {
		return fmt.Errorf("--listen %q: %w", cfg.Listen, err)
	}
	if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
		cfg.Listen = net.JoinHostPort(gateway, port)
	}
	return nil
}

// checkProviders rejects a spec whose clusters use a provider `gantry dev`
// cannot run on this host. A Kubernetes cluster is a target reached through
// its kubeconfig (the README's local recipe: scripts/kube-up.sh's).
func checkProviders(docs []spec.Document) error {
	for _, d := range docs {
		if d.Cluster == nil {
			continue
		}
		if p := d.Cluster.Spec.Provider.Name; p != "local" && p != dockerprovider.Name && p != api.ProviderKubernetes {
			return fmt.Errorf("cluster %s uses provider %q: gantry dev runs the local, docker and kubernetes providers (try --provider local)", d.Name(), p)
		}
	}
	return nil
}
