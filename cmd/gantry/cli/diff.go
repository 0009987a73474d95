package cli

import (
	"fmt"
	"slices"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/spec"
	"github.com/spf13/cobra"
)

func newDiffCmd(g *globals) *cobra.Command {
	var files []string
	cmd := &cobra.Command{
		Use:   "diff -f FILE|DIR [-f ...]",
		Short: "Show what applying the files would change (exit 1 when something would, 2 on an error), writing nothing",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			_, res, err := sendSpecs(cmd.Context(), g, files, true)
			if err != nil {
				return &exitCode{code: 2, err: err} // 1 says "differences", as kubectl diff's
			}
			changed := false
			for _, item := range res.Results {
				if item.Action != api.ActionUnchanged {
					changed = true
					printApplyResult(g.out, &api.ApplyResult{Results: []api.ApplyItem{item}})
				}
			}
			if changed {
				return &exitCode{code: 1} // as diff and kubectl diff: the differences are the output
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "spec file or directory of them (YAML or JSON; - for stdin); repeatable")
	return cmd
}

// deleteFiles deletes the resources of spec files: failover groups and
// services first, then Secrets, then clusters (which refuse while services run on them).
func deleteFiles(cmd *cobra.Command, g *globals, files []string) error {
	body, label, err := readSpecs(files)
	if err != nil {
		return err
	}
	docs, err := spec.Parse(label, body, nil)
	if err != nil {
		return err
	}
	c, err := g.client()
	if err != nil {
		return err
	}
	order := []string{api.KindFailoverGroup, api.KindService, api.KindSecret, api.KindCluster}
	slices.SortStableFunc(docs, func(a, b spec.Document) int { return slices.Index(order, a.Kind()) - slices.Index(order, b.Kind()) })
	for _, d := range docs {
		var err error
		switch d.Kind() {
		case api.KindService:
			err = c.DeleteService(cmd.Context(), d.Name())
		case api.KindSecret:
			err = c.DeleteSecret(cmd.Context(), d.Name())
		case api.KindFailoverGroup:
			err = c.DeleteFailoverGroup(cmd.Context(), d.Name())
		default:
			err = c.DeleteCluster(cmd.Context(), d.Name())
		}
		if err != nil {
			return fmt.Errorf("%s/%s: %w", kindLower(d.Kind()), d.Name(), err)
		}
		fmt.Fprintf(g.out, "%s/%s deleted\n", kindLower(d.Kind()), d.Name())
	}
	return nil
}
