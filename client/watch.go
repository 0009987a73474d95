package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/api"
)

// ErrStop, returned by a watch's handler, ends the watch without error.
var ErrStop = errors.New("stop watching")

// WatchOptions tune a watch.
type WatchOptions struct {
	// From is the revision to follow from (a list's); 0 starts with
	// every current object as ADDED.
	From int64
	// Reconnect is the wait before the watch is opened again after its
	// stream broke (default 1 s).
	Reconnect time.Duration
}

// Watch follows the changes of the objects of a list path (such as
// "/v1/replicas?service=web"), calling fn for each event in order,
// bookmarks included, until ctx ends or fn returns an error (ErrStop:
// none). A broken stream is opened again after the last revision seen, so
// fn sees every change once. When the server no longer keeps the changes
// after that revision, Watch returns an APIError with status 410: list
// again and watch from the list's revision (or from 0).
func (c *Client) Watch(ctx context.Context, listPath string, opts WatchOptions, fn func(api.WatchEvent) error) error {
	if opts.Reconnect <= 0 {
		opts.Reconnect = time.Second
	}
	from := opts.From
	for {
		err := c.watchOnce(ctx, listPath, &from, fn)
		switch {
		case errors.Is(err, ErrStop):
			return nil
		case ctx.Err() != nil:
			return nil
		case IsStatus(err, http.StatusGone), isHandlerError(err):
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(opts.Reconnect):
		}
	}
}

// handlerError marks an error of the caller's handler.
type handlerError struct{ err error }

func (e handlerError) Error() string { return e.err.Error() }
func (e handlerError) Unwrap() error { return e.err }

func isHandlerError(err error) bool {
	var h handlerError
	return errors.As(err, &h)
}

func (c *Client) watchOnce(ctx context.Context, listPath string, from *int64, fn func(api.WatchEvent) error) error {
	sep := "?"
	if strings.Contains(listPath, "?") {
		sep = "&"
	}
	path := listPath + sep + "watch=true&resourceVersion=" + strconv.FormatInt(*from, 10)
	streaming := *c
	httpClient := *c.http
	httpClient.Timeout = 0 // a watch lasts as long as ctx
	streaming.http = &httpClient
	streaming.attempt = 0
	resp, err := streaming.send(ctx, http.MethodGet, path, "", nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 {
		return errorResponse(resp, "watch "+listPath)
	}
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(make([]byte, 64<<10), 64<<20)
	for lines.Scan() {
		var e api.WatchEvent
		if err := json.Unmarshal(lines.Bytes(), &e); err != nil {
			return fmt.Errorf("watch %s: decode event: %w", listPath, err)
		}
		if e.Type == api.WatchError {
			var eb api.ErrorBody
			_ = json.Unmarshal(e.Object, &eb)
			status := http.StatusInternalServerError
			if eb.Error.Code == api.ErrorExpired {
				status = http.StatusGone
			}
			return &APIError{Status: status, ErrorDetail: eb.Error}
		}
		if err := fn(e); err != nil {
			return handlerError{err}
		}
		if e.ResourceVersion > *from {
			*from = e.ResourceVersion
		}
	}
	if err := lines.Err(); err != nil {
		return fmt.Errorf("watch %s: %w", listPath, err)
	}
	return fmt.Errorf("watch %s: %w", listPath, io.ErrUnexpectedEOF)
}

// errorResponse is the APIError of a response with an error status.
func errorResponse(resp *http.Response, what string) error {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var eb api.ErrorBody
	if json.Unmarshal(data, &eb) != nil || eb.Error.Message == "" {
		eb.Error = api.ErrorDetail{Message: fmt.Sprintf("%s: HTTP %d", what, resp.StatusCode)}
	}
	return &APIError{Status: resp.StatusCode, ErrorDetail: eb.Error}
}

// Revision is the store revision a list path is at now (read with a
// one-object page).
func (c *Client) Revision(ctx context.Context, listPath string) (int64, error) {
	sep := "?"
	if strings.Contains(listPath, "?") {
		sep = "&"
	}
	var out struct {
		Metadata api.ListMeta `json:"metadata"`
	}
	if err := c.getJSON(ctx, listPath+sep+"limit=1", &out); err != nil {
		return 0, err
	}
	return out.Metadata.ResourceVersion, nil
}

// Changes wakes its caller whenever an object of one of the list paths
// changes, from now until ctx ends: a loop that reads and shows state
// waits on it instead of a timer. Wakes coalesce; a watch that had to
// start again (expired, server gone) wakes too, since it may have missed
// a change.
func (c *Client) Changes(ctx context.Context, opts WatchOptions, listPaths ...string) <-chan struct{} {
	wake := make(chan struct{}, 1)
	signal := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	if opts.Reconnect <= 0 {
		opts.Reconnect = time.Second
	}
	for _, path := range listPaths {
		go func() {
			for ctx.Err() == nil {
				from, err := c.Revision(ctx, path)
				if err == nil {
					// What changed between the caller's last read and
					// from is not in the watch: the caller reads again.
					signal()
					err = c.Watch(ctx, path, WatchOptions{From: from, Reconnect: opts.Reconnect}, func(e api.WatchEvent) error {
						if e.Type != api.WatchBookmark {
							signal()
						}
						return nil
					})
				}
				if err != nil {
					signal()
					select {
					case <-ctx.Done():
					case <-time.After(opts.Reconnect):
					}
				}
			}
		}()
	}
	return wake
}

// ReplicaQuery selects replicas; zero fields match all.
type ReplicaQuery struct {
	Service, Cluster, Machine string
}

// ReplicaPage is one page of replicas.
type ReplicaPage struct {
	Metadata api.ListMeta  `json:"metadata"`
	Items    []api.Replica `json:"items"`
}

// ListReplicasPage reads one page of at most limit replicas, after the
// page whose continue token is given ("" for the first).
func (c *Client) ListReplicasPage(ctx context.Context, q ReplicaQuery, limit int, cont string) (*ReplicaPage, error) {
	v := url.Values{"limit": {strconv.Itoa(limit)}}
	for k, val := range map[string]string{"service": q.Service, "cluster": q.Cluster, "machine": q.Machine, "continue": cont} {
		if val != "" {
			v.Set(k, val)
		}
	}
	var out ReplicaPage
	return &out, c.getJSON(ctx, "/v1/replicas?"+v.Encode(), &out)
}

// ListReplicasWindow reads at most limit replicas after the first offset
// (a numbered page), and how many the whole list holds.
func (c *Client) ListReplicasWindow(ctx context.Context, q ReplicaQuery, offset, limit int) ([]api.Replica, int, error) {
	v := url.Values{"limit": {strconv.Itoa(limit)}, "offset": {strconv.Itoa(offset)}}
	for k, val := range map[string]string{"service": q.Service, "cluster": q.Cluster, "machine": q.Machine} {
		if val != "" {
			v.Set(k, val)
		}
	}
	var out ReplicaPage
	if err := c.getJSON(ctx, "/v1/replicas?"+v.Encode(), &out); err != nil {
		return nil, 0, err
	}
	return out.Items, windowTotal(out.Metadata, offset, len(out.Items)), nil
}

// ListMachinesWindow reads at most limit live machines of a cluster (""
// for all) after the first offset, by id (a numbered page), and how many
// the whole list holds.
func (c *Client) ListMachinesWindow(ctx context.Context, cluster string, offset, limit int) ([]api.Machine, int, error) {
	v := url.Values{"limit": {strconv.Itoa(limit)}, "offset": {strconv.Itoa(offset)}}
	if cluster != "" {
		v.Set("cluster", cluster)
	}
	var out MachinePage
	if err := c.getJSON(ctx, "/v1/machines?"+v.Encode(), &out); err != nil {
		return nil, 0, err
	}
	return out.Items, windowTotal(out.Metadata, offset, len(out.Items)), nil
}

// windowTotal is the size of the list a numbered page of n at offset
// came from.
func windowTotal(meta api.ListMeta, offset, n int) int {
	total := offset + n
	if left := meta.RemainingItemCount; left != nil {
		total += int(*left)
	}
	return total
}

// MachinePage is one page of machines.
type MachinePage struct {
	Metadata api.ListMeta  `json:"metadata"`
	Items    []api.Machine `json:"items"`
}

// ListMachinesPage reads one page of at most limit machines of a cluster
// ("" for all), after the page whose continue token is given.
func (c *Client) ListMachinesPage(ctx context.Context, cluster string, limit int, cont string) (*MachinePage, error) {
	v := url.Values{"limit": {strconv.Itoa(limit)}}
	if cluster != "" {
		v.Set("cluster", cluster)
	}
	if cont != "" {
		v.Set("continue", cont)
	}
	var out MachinePage
	return &out, c.getJSON(ctx, "/v1/machines?"+v.Encode(), &out)
}

// ListReplicasInChunks reads every replica the query selects, chunk at
// a time (0: in one request), all at one revision.
func (c *Client) ListReplicasInChunks(ctx context.Context, q ReplicaQuery, chunk int) ([]api.Replica, error) {
	return collect(func(each func([]api.Replica) error) error { return c.EachReplicaChunk(ctx, q, chunk, each) })
}

// EachReplicaChunk hands each chunk of the replicas the query selects to
// each as it arrives (kubectl prints a long list that way).
func (c *Client) EachReplicaChunk(ctx context.Context, q ReplicaQuery, chunk int, each func([]api.Replica) error) error {
	return eachChunk(chunk, func(cont string) ([]api.Replica, string, error) {
		page, err := c.ListReplicasPage(ctx, q, chunk, cont)
		if err != nil {
			return nil, "", err
		}
		return page.Items, page.Metadata.Continue, nil
	}, each)
}

// ListMachinesInChunks reads every machine of a cluster ("" for all),
// chunk at a time.
func (c *Client) ListMachinesInChunks(ctx context.Context, cluster string, chunk int) ([]api.Machine, error) {
	return collect(func(each func([]api.Machine) error) error { return c.EachMachineChunk(ctx, cluster, chunk, each) })
}

// EachMachineChunk hands each chunk of a cluster's machines ("" for all)
// to each as it arrives.
func (c *Client) EachMachineChunk(ctx context.Context, cluster string, chunk int, each func([]api.Machine) error) error {
	return eachChunk(chunk, func(cont string) ([]api.Machine, string, error) {
		page, err := c.ListMachinesPage(ctx, cluster, chunk, cont)
		if err != nil {
			return nil, "", err
		}
		return page.Items, page.Metadata.Continue, nil
	}, each)
}

// eachChunk reads pages until one says there is no more, handing each to
// each.
func eachChunk[T any](chunk int, page func(cont string) ([]T, string, error), each func([]T) error) error {
	cont := ""
	for {
		items, next, err := page(cont)
		if err != nil {
			return err
		}
		if err := each(items); err != nil {
			return err
		}
		if next == "" || chunk <= 0 {
			return nil
		}
		cont = next
	}
}

// collect gathers what a chunked read hands over.
func collect[T any](read func(each func([]T) error) error) ([]T, error) {
	var out []T
	err := read(func(items []T) error {
		out = append(out, items...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
