package cli

import (
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

func newSecretCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "secret", Short: "Create, list and delete Secrets (values are sealed on the server and never shown)"}
	cmd.AddCommand(newSecretCreateCmd(g), newSecretListCmd(g), newSecretDeleteCmd(g))
	return cmd
}

func newSecretCreateCmd(g *globals) *cobra.Command {
	var literals, files []string
	var overwrite bool
	cmd := &cobra.Command{
		Use:   "create NAME (--from-literal KEY=VALUE | --from-file KEY=PATH)...",
		Short: "Create a Secret; with --overwrite, replace its values (replicas and machines that use it roll)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := secretData(literals, files)
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			sec, err := c.CreateSecret(cmd.Context(), args[0], data, overwrite)
			if err != nil {
				return err
			}
			fmt.Fprintf(g.out, "secret/%s: keys %s, revision %s\n", sec.Metadata.Name, strings.Join(sec.Status.Keys, ", "), sec.Status.Revision)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&literals, "from-literal", nil, "KEY=VALUE; repeatable (the value is on your command line: prefer --from-file)")
	f.StringArrayVar(&files, "from-file", nil, "KEY=PATH: the file's content is the value; repeatable")
	f.BoolVar(&overwrite, "overwrite", false, "replace the values of an existing Secret")
	return cmd
}

// secretData reads --from-literal and --from-file; errors name keys and
// paths, never values.
func secretData(literals, files []string) (map[string]string, error) {
	data := map[string]string{}
	add := func(flag, entry string, value func(string) (string, error)) error {
		key, rest, ok := strings.Cut(entry, "=")
		if !ok || key == "" {
			return fmt.Errorf("--%s: want KEY=%s, got an entry without '=' or key", flag, map[string]string{"from-literal": "VALUE", "from-file": "PATH"}[flag])
		}
		if _, dup := data[key]; dup {
			return fmt.Errorf("--%s: key %s given twice", flag, key)
		}
		v, err := value(rest)
		if err != nil {
			return err
		}
		data[key] = v
		return nil
	}
	for _, l := range literals {
		if err := add("from-literal", l, func(v string) (string, error) { return v, nil }); err != nil {
			return nil, err
		}
	}
	for _, f := range files {
		if err := add("from-file", f, func(path string) (string, error) {
			b, err := os.ReadFile(path)
			if err != nil {
				return "", fmt.Errorf("--from-file: %w", err)
			}
			return string(b), nil
		}); err != nil {
			return nil, err
		}
	}
	if len(data) == 0 {
		return nil, fmt.Errorf("give at least one --from-literal or --from-file")
	}
	return data, nil
}

func newSecretListCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use: "list", Short: "List Secrets: keys and revisions, never values", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			secrets, err := c.ListSecrets(cmd.Context())
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(g.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tKEYS\tREVISION\tUPDATED")
			for _, s := range secrets {
				updated := ""
				if s.Metadata.UpdatedAt != nil {
					updated = s.Metadata.UpdatedAt.Format("2006-01-02 15:04:05")
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.Metadata.Name, strings.Join(s.Status.Keys, ","), s.Status.Revision, updated)
			}
			return tw.Flush()
		},
	}
}

func newSecretDeleteCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use: "delete NAME", Short: "Delete a Secret no service or cluster uses", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			if err := c.DeleteSecret(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(g.out, "secret/%s deleted\n", args[0])
			return nil
		},
	}
}
