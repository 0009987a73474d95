package cli

import (
	"errors"
	"io"

	"github.com/spf13/cobra"
)

func newLogsCmd(g *globals) *cobra.Command {
	var follow bool
	var tail int
	cmd := &cobra.Command{
		Use:               "logs REPLICA",
		ValidArgsFunction: completeNames(g, "replicas"),
		Short:             "Print a replica's output (stdout and stderr), relayed by the server from its machine",
		Args:              cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			rc, err := c.Logs(cmd.Context(), args[0], follow, tail)
			if err != nil {
				return err
			}
			defer rc.Close()
			_, err = io.Copy(g.out, rc)
			if follow && cmd.Context().Err() != nil {
				return nil // Ctrl-C ends a followed log
			}
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return errors.New("the log stream was cut (machine or server gone)")
			}
			return err
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new output")
	cmd.Flags().IntVar(&tail, "tail", -1, "lines from the end to print first (-1: all)")
	return cmd
}
