package cli

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/gantry-dev/gantry/client"
	"github.com/spf13/cobra"
)

func newLogsCmd(g *globals) *cobra.Command {
	var follow bool
	var retryFor time.Duration
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
			rc, err := logsRetrying(cmd, g, c, args[0], follow, tail, retryFor)
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
	cmd.Flags().DurationVar(&retryFor, "retry-for", 20*time.Second, "how long to keep trying while the servers answer that they cannot reach the replica's machine now (a server gone, a leader change)")
	return cmd
}

// logsRetrying opens a replica's logs, trying again while every server
// answers that it cannot reach the machine now (502/503/504: the server
// that relays the machine's logs is gone and the agent has not moved to
// another one yet), saying once on stderr why it waits.
func logsRetrying(cmd *cobra.Command, g *globals, c *client.Client, replica string, follow bool, tail int, retryFor time.Duration) (io.ReadCloser, error) {
	deadline := time.Now().Add(retryFor)
	said := false
	for {
		rc, err := c.Logs(cmd.Context(), replica, follow, tail)
		var apiErr *client.APIError
		transient := errors.As(err, &apiErr) && (apiErr.Status == http.StatusBadGateway || apiErr.Status == http.StatusServiceUnavailable || apiErr.Status == http.StatusGatewayTimeout)
		if err == nil || !transient || time.Now().After(deadline) || cmd.Context().Err() != nil {
			return rc, err
		}
		if !said {
			fmt.Fprintf(cmd.ErrOrStderr(), "waiting for the replica's machine to be reachable again: %v\n", err)
			said = true
		}
		select {
		case <-cmd.Context().Done():
			return nil, cmd.Context().Err()
		case <-time.After(time.Second):
		}
	}
}
