package cli

import (
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

func newTraceCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "trace", Short: "Keep demand traces on the server for the dashboard's simulations (put, list, delete)"}
	cmd.AddCommand(newTracePutCmd(g), newTraceListCmd(g), newTraceDeleteCmd(g))
	return cmd
}

func newTracePutCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "put NAME FILE.csv",
		Short: "Keep a demand trace (CSV of time,service,replicas[,cpu,memory,gpu]; docs/simulate.md), checked against the stored services",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := os.ReadFile(args[1])
			if err != nil {
				return fmt.Errorf("read trace: %w", err)
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			tr, err := c.PutTrace(cmd.Context(), args[0], data)
			if err != nil {
				return err
			}
			fmt.Fprintf(g.out, "trace/%s: %d rows of %s, %s to %s\n", tr.Name, tr.Rows, strings.Join(tr.Services, ", "),
				tr.Start.Format("2006-01-02 15:04"), tr.End.Format("2006-01-02 15:04"))
			return nil
		},
	}
}

func newTraceListCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use: "list", Short: "List the kept demand traces", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			traces, err := c.ListTraces(cmd.Context())
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(g.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tROWS\tSERVICES\tSTART\tEND\tBYTES")
			for _, t := range traces {
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%d\n", t.Name, t.Rows, strings.Join(t.Services, ","),
					t.Start.Format("2006-01-02 15:04"), t.End.Format("2006-01-02 15:04"), t.Bytes)
			}
			return tw.Flush()
		},
	}
}

func newTraceDeleteCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use: "delete NAME", Short: "Delete a kept demand trace", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			if err := c.DeleteTrace(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(g.out, "trace/%s deleted\n", args[0])
			return nil
		},
	}
}
