package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/client"
	"github.com/spf13/cobra"
)

// logsOptions are logs' flags, in kubectl's habits.
type logsOptions struct {
	client.LogOptions
	retryFor time.Duration
	prefix   bool
}

func newLogsCmd(g *globals) *cobra.Command {
	var o logsOptions
	cmd := &cobra.Command{
		Use:               "logs (REPLICA | SERVICE | replica/NAME | service/NAME)",
		ValidArgsFunction: completeNames(g, "replicas"),
		Short:             "Print a replica's output (stdout and stderr), or every replica's of a service with each line prefixed, relayed by the server from their machines",
		Args:              cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.Previous && o.Follow {
				return errors.New("--previous with --follow: an ended instance's output cannot be followed")
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			replicas, multi, err := logTargets(cmd.Context(), c, args[0])
			if err != nil {
				return err
			}
			prefix := multi
			if cmd.Flags().Changed("prefix") {
				prefix = o.prefix
			}
			if len(replicas) == 1 {
				return printLogs(cmd, g, c, replicas[0], o, prefix, &sync.Mutex{})
			}
			return printManyLogs(cmd, g, c, replicas, o, prefix)
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&o.Follow, "follow", "f", false, "keep printing new output")
	f.IntVar(&o.Tail, "tail", -1, "lines from the end to print first (-1: all)")
	f.BoolVarP(&o.Previous, "previous", "p", false, "print the output of the replica's instance before its latest start (a crash, a restart)")
	f.BoolVar(&o.prefix, "prefix", false, "prefix each line with [REPLICA] (the default for a service's replicas)")
	f.DurationVar(&o.retryFor, "retry-for", 20*time.Second, "how long to keep trying while the servers answer that they cannot reach the replica's machine now (a server gone, a leader change)")
	return cmd
}

// logTargets are the replicas whose output logs prints: the replica
// named, or every replica of the service named (multi).
func logTargets(ctx context.Context, c *client.Client, arg string) (replicas []string, multi bool, err error) {
	kind, name := "", arg
	if k, n, err := splitKindName(arg); err == nil {
		kind, name = k, n
	}
	if kind == "" || kind == "replicas" {
		_, err := c.GetReplica(ctx, name)
		if err == nil {
			return []string{name}, false, nil
		}
		if kind == "replicas" || !client.IsStatus(err, http.StatusNotFound) {
			return nil, false, err
		}
	}
	if kind != "" && kind != "services" {
		return nil, false, fmt.Errorf("%s: logs are read from replicas and services", arg)
	}
	list, err := c.ListReplicas(ctx, name)
	if err != nil {
		return nil, false, err
	}
	if len(list) == 0 {
		if _, err := c.GetService(ctx, name); client.IsStatus(err, http.StatusNotFound) {
			return nil, false, fmt.Errorf("no replica or service named %q", name)
		}
		return nil, false, fmt.Errorf("service %s has no replicas", name)
	}
	for _, r := range list {
		if serving(r) {
			replicas = append(replicas, r.ID)
		}
	}
	if len(replicas) == 0 {
		return nil, false, fmt.Errorf("no replica of service %s runs on a machine yet", name)
	}
	return replicas, true, nil
}

// serving: a replica whose output is on a machine (or a Pod).
func serving(r api.Replica) bool {
	return r.Machine != "" || r.Pod != ""
}

// printManyLogs prints several replicas' output: one after the other,
// or, when following, interleaved a line at a time as it comes.
func printManyLogs(cmd *cobra.Command, g *globals, c *client.Client, replicas []string, o logsOptions, prefix bool) error {
	var mu sync.Mutex
	if !o.Follow {
		var errs []error
		for _, r := range replicas {
			if err := printLogs(cmd, g, c, r, o, prefix, &mu); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", r, err))
			}
		}
		return errors.Join(errs...)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(replicas))
	for i, r := range replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := printLogs(cmd, g, c, r, o, prefix, &mu); err != nil {
				errs[i] = fmt.Errorf("%s: %w", r, err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// printLogs copies one replica's output to the CLI's output, each line
// under mu (prefixed with [REPLICA] when asked).
func printLogs(cmd *cobra.Command, g *globals, c *client.Client, replica string, o logsOptions, prefix bool, mu *sync.Mutex) error {
	rc, err := logsRetrying(cmd, c, replica, o)
	if err != nil {
		return err
	}
	defer rc.Close()
	if !prefix {
		_, err = io.Copy(lockedWriter{w: g.out, mu: mu}, rc)
	} else {
		err = copyPrefixed(g.out, rc, "["+replica+"] ", mu)
	}
	if o.Follow && cmd.Context().Err() != nil {
		return nil // Ctrl-C ends a followed log
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("the log stream was cut (machine or server gone)")
	}
	return err
}

// copyPrefixed writes each line of r to w with prefix, a whole line at
// a time under mu.
func copyPrefixed(w io.Writer, r io.Reader, prefix string, mu *sync.Mutex) error {
	lines := bufio.NewReader(r)
	for {
		line, err := lines.ReadBytes('\n')
		if len(line) > 0 {
			if line[len(line)-1] != '\n' {
				line = append(line, '\n')
			}
			mu.Lock()
			_, werr := w.Write(append([]byte(prefix), line...))
			mu.Unlock()
			if werr != nil {
				return werr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// logsRetrying opens a replica's logs, trying again while every server
// answers that it cannot reach the machine now (502/503/504: the server
// that relays the machine's logs is gone and the agent has not moved to
// another one yet), saying once on stderr why it waits.
func logsRetrying(cmd *cobra.Command, c *client.Client, replica string, o logsOptions) (io.ReadCloser, error) {
	deadline := time.Now().Add(o.retryFor)
	said := false
	for {
		rc, err := c.Logs(cmd.Context(), replica, o.LogOptions)
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
