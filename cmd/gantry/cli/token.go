package cli

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/spf13/cobra"
)

func newTokenCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "token", Short: "Create, list and revoke API tokens (admin, read-only, join)"}
	cmd.AddCommand(newTokenCreateCmd(g), newTokenListCmd(g), newTokenRevokeCmd(g))
	return cmd
}

func newTokenCreateCmd(g *globals) *cobra.Command {
	var req api.TokenRequest
	var kind string
	cmd := &cobra.Command{
		Use:   "create --kind admin|read-only|join [--cluster C --group G] [--ttl 24h] [--max-uses N]",
		Short: "Create a token; its secret is printed this once (stored hashed)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			req.Kind = api.TokenKind(kind)
			resp, err := c.CreateToken(cmd.Context(), req)
			if err != nil {
				return err
			}
			fmt.Fprintf(g.errOut, "token/%s created (%s); its secret, shown this once:\n", resp.ID, resp.Kind)
			fmt.Fprintln(g.out, resp.Secret)
			if resp.CACertHash != "" {
				fmt.Fprintf(g.errOut, "the server's CA: %s (join tokens carry it; agents verify the server with it)\n", resp.CACertHash)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&kind, "kind", "", "admin, read-only or join")
	f.StringVar(&req.Cluster, "cluster", "", "join: the cluster machines join")
	f.StringVar(&req.Group, "group", "", "join: their capacity group")
	f.StringVar(&req.TTL, "ttl", "", "validity (join: 24h unless set; others: until revoked)")
	f.IntVar(&req.MaxUses, "max-uses", 0, "join: machines it may join (default 1; -1 for no limit)")
	f.StringVar(&req.Description, "description", "", "what the token is for")
	return cmd
}

func newTokenListCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use: "list", Short: "List tokens (never their secrets)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			toks, err := c.ListTokens(cmd.Context())
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(g.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tKIND\tCLUSTER/GROUP\tUSES\tEXPIRES\tREVOKED\tDESCRIPTION")
			for _, t := range toks {
				scope, uses := "-", "-"
				if t.Kind == api.TokenJoin {
					scope, uses = t.Cluster+"/"+t.Group, fmt.Sprintf("%d/%d", t.Uses, t.MaxUses)
					if t.MaxUses == 0 {
						uses = "∞ (not counted)"
					}
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Kind, scope, uses, when(t.ExpiresAt), when(t.RevokedAt), t.Description)
			}
			return tw.Flush()
		},
	}
}

func when(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func newTokenRevokeCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use: "revoke ID", Short: "Revoke a token, at once on every server", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			t, err := c.RevokeToken(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(g.out, "token/%s revoked\n", t.ID)
			return nil
		},
	}
}
