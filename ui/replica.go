package ui

import (
	"context"
	"errors"
	"io"
	"net/url"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/client"
)

// replicaPage is one replica: where it runs and answers, the end of its
// output (or of its previous instance's), and its latest events.
type replicaPage struct {
	Replica  *api.Replica
	URL      string
	Previous bool
	Logs     string
	// LogsError says why the output could not be read (no previous
	// instance, an agent out of reach); the page shows it in place.
	LogsError string
	Events    []api.Event
}

// loadReplica reads a replica, the last LogTailLines lines of its output
// (previous=1: of its previous instance's) and its latest events. The
// page is read again every LiveInterval while it is open: output does
// not come through the change feed.
func loadReplica(ctx context.Context, c *client.Client, id string, q url.Values, cfg Config) (any, error) {
	r, err := c.GetReplica(ctx, id)
	if err != nil {
		return nil, err
	}
	page := replicaPage{Replica: r, URL: r.URL(), Previous: q.Get("previous") == "1"}
	page.Logs, err = tailOutput(ctx, c, id, client.LogOptions{Tail: cfg.LogTailLines, Previous: page.Previous}, cfg.LogTailBytes)
	if err != nil {
		page.LogsError = err.Error()
	}
	events, err := c.ListEvents(ctx, client.EventQuery{Kind: "Replica", Name: id, Limit: cfg.ReplicaEvents})
	if err != nil {
		return nil, err
	}
	for i := len(events) - 1; i >= 0; i-- {
		page.Events = append(page.Events, events[i])
	}
	return page, nil
}

// tailOutput reads the end of a replica's output, at most limit bytes.
func tailOutput(ctx context.Context, c *client.Client, id string, opts client.LogOptions, limit int64) (string, error) {
	body, err := c.Logs(ctx, id, opts)
	if err != nil {
		var apiErr *client.APIError
		if errors.As(err, &apiErr) {
			return "", errors.New(apiErr.Message)
		}
		return "", err
	}
	defer body.Close()
	out, err := io.ReadAll(io.LimitReader(body, limit))
	return string(out), err
}
