package ui

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/client"
)

// stream serves one page's live body as server-sent events: the view is
// read again when the change feed says what it shows changed (every
// LiveInterval for the views outside the feed) and its body sent
// whenever it differs from the last one sent ("view" events, swapped in
// by htmx's SSE extension).
func (d *Dashboard) stream(w http.ResponseWriter, r *http.Request, c *client.Client) {
	target, err := url.Parse(r.URL.Query().Get("view"))
	if err != nil || !strings.HasPrefix(target.Path, "/ui/") {
		http.Error(w, "view: want a dashboard path such as /ui/machines", http.StatusBadRequest)
		return
	}
	v, ok := viewFor(strings.TrimPrefix(target.Path, "/ui/"))
	if !ok || !v.live() {
		http.Error(w, "view: no dashboard page "+target.Path, http.StatusBadRequest)
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
	viewReq := r.Clone(r.Context())
	viewReq.URL = target
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	var changed <-chan struct{}
	var tick <-chan time.Time
	if feeds := v.feeds(); feeds != nil {
		changed = c.Changes(ctx, client.WatchOptions{Reconnect: d.cfg.LiveInterval}, feeds...)
	} else {
		ticker := time.NewTicker(d.cfg.LiveInterval)
		defer ticker.Stop()
		tick = ticker.C
	}
	var last []byte
	for {
		body, err := d.body(viewReq, c, v)
		if err != nil {
			fmt.Fprintf(w, "event: failed\ndata: %s\n\n", strings.ReplaceAll(err.Error(), "\n", " "))
			flusher.Flush()
			return
		}
		if !bytes.Equal(last, []byte(body)) {
			last = []byte(body)
			writeEvent(w, "view", last)
			flusher.Flush()
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-tick:
		}
	}
}

func writeEvent(w http.ResponseWriter, name string, data []byte) {
	fmt.Fprintf(w, "event: %s\n", name)
	for _, line := range bytes.Split(data, []byte("\n")) {
		fmt.Fprintf(w, "data: %s\n", line)
	}
	fmt.Fprint(w, "\n")
}
