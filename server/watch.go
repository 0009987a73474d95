package server

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/decide"
	"github.com/gantry-dev/gantry/spec"
	"github.com/gantry-dev/gantry/store"
)

// WatchConfig tunes the change feed's watches.
type WatchConfig struct {
	// Bookmark is how often a quiet watch sends its revision, so that a
	// client whose objects did not change resumes from a recent one.
	Bookmark time.Duration
	// Batch is how many changes a watch reads from the store at once.
	Batch int
}

// DefaultWatchConfig returns the defaults.
func DefaultWatchConfig() WatchConfig { return WatchConfig{Bookmark: 30 * time.Second, Batch: 500} }

// watchFilter selects the objects of a watch by the query parameters of
// its list (a replica's service, cluster and machine; a machine's
// cluster).
type watchFilter struct {
	Service string `json:"service"`
	Cluster string `json:"cluster"`
	Machine string `json:"machine"`
}

func (f watchFilter) matches(data []byte) bool {
	if f == (watchFilter{}) {
		return true
	}
	var o watchFilter
	if json.Unmarshal(data, &o) != nil {
		return false
	}
	return (f.Service == "" || f.Service == o.Service) && (f.Cluster == "" || f.Cluster == o.Cluster) && (f.Machine == "" || f.Machine == o.Machine)
}

// watching reports whether a list request asks for a watch, and serves
// it: `?watch=true&resourceVersion=N` streams every change of the kind
// after revision N as JSON lines (api.WatchEvent), the way `kubectl get
// -w` reads Kubernetes. Without a resourceVersion the stream starts with
// the current objects as ADDED.
func (s *Server) watching(w http.ResponseWriter, r *http.Request, kind string, f watchFilter, current func(tx store.Tx) ([]any, error)) bool {
	if r.URL.Query().Get("watch") != "true" {
		return false
	}
	from, err := queryRevision(r.URL.Query(), "resourceVersion")
	if err != nil {
		s.writeError(w, r, err)
		return true
	}
	var initial []api.WatchEvent
	if err := s.store.View(r.Context(), func(tx store.Tx) error {
		if from > 0 {
			_, err := tx.Changes(store.ChangeFilter{After: from, Kinds: []string{kind}, Limit: 1})
			return err
		}
		objs, err := current(tx)
		if err != nil {
			return err
		}
		if from, err = tx.Revision(); err != nil {
			return err
		}
		for _, o := range objs {
			data, err := json.Marshal(o)
			if err != nil {
				return err
			}
			initial = append(initial, api.WatchEvent{Type: api.WatchAdded, Object: data})
		}
		// The list's revision comes after its objects: a client cut off
		// among them starts again from 0, not after the list.
		initial = append(initial, api.WatchEvent{Type: api.WatchBookmark, ResourceVersion: from})
		return nil
	}); err != nil {
		s.writeError(w, r, err)
		return true
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	stream := watchStream{w: w, rc: http.NewResponseController(w)}
	for _, e := range initial {
		stream.send(e)
	}
	stream.flush()
	s.follow(r, &stream, kind, f, from)
	return true
}

type watchStream struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	err error
}

func (st *watchStream) send(e api.WatchEvent) {
	if st.err != nil {
		return
	}
	data, err := json.Marshal(e)
	if err != nil {
		st.err = err
		return
	}
	_, st.err = st.w.Write(append(data, '\n'))
}

func (st *watchStream) flush() {
	if st.err == nil {
		st.err = st.rc.Flush()
	}
}

// follow sends the changes after rev as they are committed, until the
// client goes or the stream fails. A service's or failover group's
// status lives in the control loop's memory (a deployment's progress, a
// group's phase): a change there is sent as a MODIFIED of its object.
func (s *Server) follow(r *http.Request, st *watchStream, kind string, f watchFilter, rev int64) {
	ctx := r.Context()
	bookmark := s.clock.NewTicker(s.cfg.Watch.Bookmark)
	defer bookmark.Stop()
	kinds := []string{kind}
	if kind == store.FeedService || kind == store.FeedFailoverGroup {
		kinds = append(kinds, store.FeedMemory)
	}
	for st.err == nil {
		changed := s.store.Changed()
		var changes []store.Change
		err := s.store.View(ctx, func(tx store.Tx) error {
			var err error
			if changes, err = tx.Changes(store.ChangeFilter{After: rev, Kinds: kinds, Limit: s.cfg.Watch.Batch}); err != nil {
				return err
			}
			return statusChanges(tx, kind, changes)
		})
		if errors.Is(err, store.ErrCompacted) {
			st.send(api.WatchEvent{Type: api.WatchError, Object: expiredBody(err)})
			st.flush()
			return
		}
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("watch ends: store read failed", "kind", kind, "err", err)
			}
			return
		}
		for _, c := range changes {
			rev = c.Revision
			if c.Kind == kind && f.matches(c.Data) {
				st.send(api.WatchEvent{Type: eventType(c), ResourceVersion: c.Revision, Object: c.Data})
			}
		}
		st.flush()
		if len(changes) == s.cfg.Watch.Batch {
			continue // more are waiting
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-bookmark.C():
			st.send(api.WatchEvent{Type: api.WatchBookmark, ResourceVersion: rev})
			st.flush()
		}
	}
}

// statusChanges turns the memory changes among changes into changes of
// the objects of kind whose status they hold (the object as it is now;
// none when it is gone or the entry is not a status of kind).
func statusChanges(tx store.Tx, kind string, changes []store.Change) error {
	for i, c := range changes {
		if c.Kind != store.FeedMemory {
			continue
		}
		changes[i].Kind = "" // sent as nothing unless it is a status of kind
		owner, name := memoryOwner(c.Name)
		if owner != kind {
			continue
		}
		var obj any
		var err error
		switch kind {
		case store.FeedService:
			obj, err = tx.GetService(name)
		case store.FeedFailoverGroup:
			obj, err = tx.GetFailoverGroup(name)
		}
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		data, err := json.Marshal(obj)
		if err != nil {
			return err
		}
		changes[i] = store.Change{Revision: c.Revision, Kind: kind, Name: name, Data: data, At: c.At}
	}
	return nil
}

// memoryOwner is the kind and name of the object whose status a memory
// entry holds ("" when none).
func memoryOwner(key string) (kind, name string) {
	owners := []struct{ prefix, kind string }{
		{decide.DeploymentKey(""), store.FeedService},
		{decide.PromotionKey(""), store.FeedService},
		{strings.TrimSuffix(decide.RevisionPrefix(""), "/"), store.FeedService},
		{decide.FailoverKey(""), store.FeedFailoverGroup},
		{decide.FailoverRequestKey(""), store.FeedFailoverGroup},
	}
	for _, o := range owners {
		if rest, ok := strings.CutPrefix(key, o.prefix); ok {
			name, _, _ = strings.Cut(rest, "/")
			return o.kind, name
		}
	}
	return "", ""
}

// listAny is a list as objects to encode.
func listAny[T any](items []*T, err error) ([]any, error) {
	out := make([]any, len(items))
	for i, it := range items {
		out[i] = it
	}
	return out, err
}

func eventType(c store.Change) string {
	switch {
	case c.Deleted:
		return api.WatchDeleted
	case c.Created:
		return api.WatchAdded
	}
	return api.WatchModified
}

func expiredBody(err error) json.RawMessage {
	data, _ := json.Marshal(api.ErrorBody{Error: api.ErrorDetail{Code: api.ErrorExpired, Message: err.Error(), Field: "resourceVersion"}})
	return data
}

func queryRevision(q url.Values, param string) (int64, error) {
	v := q.Get(param)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, errorf(http.StatusBadRequest, "invalid", param, "query parameter %s: want a non-negative integer, got %q", param, v)
	}
	return n, nil
}

// listPage is where a list request starts and how much it reads:
// `limit` and the `continue` token of the page before. Every page of a
// list reports the revision of its first page; pages after the first are
// read later and may be newer, which a watch from that revision
// reconciles (it sends those objects' changes again).
type listPage struct {
	Limit    int      `json:"-"`
	Revision int64    `json:"rv"`
	After    []string `json:"after"`
}

func parseListPage(q url.Values) (listPage, error) {
	var p listPage
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return p, errorf(http.StatusBadRequest, "invalid", "limit", "query parameter limit: want a non-negative integer, got %q", v)
		}
		p.Limit = n
	}
	if v := q.Get("continue"); v != "" {
		data, err := base64.RawURLEncoding.DecodeString(v)
		if err == nil {
			err = json.Unmarshal(data, &p)
		}
		if err != nil || len(p.After) == 0 {
			return p, errorf(http.StatusBadRequest, "invalid", "continue", "query parameter continue: not a token this server gave")
		}
	}
	return p, nil
}

// meta is the list's metadata: its revision (the first page's) and,
// when the page is full, the token of the next.
func (p listPage) meta(rev int64, n int, lastKey []string) api.ListMeta {
	if p.Revision != 0 {
		rev = p.Revision
	}
	m := api.ListMeta{ResourceVersion: rev}
	if p.Limit > 0 && n == p.Limit {
		data, _ := json.Marshal(listPage{Revision: rev, After: lastKey})
		m.Continue = base64.RawURLEncoding.EncodeToString(data)
	}
	return m
}

// checkVersions refuses documents written on a condition
// (metadata.resourceVersion) that no longer holds.
func checkVersions(tx store.Tx, docs []spec.Document) error {
	for _, d := range docs {
		var rv int64
		switch {
		case d.Cluster != nil:
			rv = d.Cluster.Metadata.ResourceVersion
		case d.Service != nil:
			rv = d.Service.Metadata.ResourceVersion
		case d.FailoverGroup != nil:
			rv = d.FailoverGroup.Metadata.ResourceVersion
		}
		if rv == 0 {
			continue
		}
		if err := tx.CheckVersion(d.Kind(), d.Name(), rv); err != nil {
			if errors.Is(err, store.ErrConflict) {
				return errorf(http.StatusConflict, "conflict", "metadata.resourceVersion",
					"document %d: metadata.resourceVersion: %v; read it again and retry", d.Index, err)
			}
			return fmt.Errorf("check %s %s: %w", d.Kind(), d.Name(), err)
		}
	}
	return nil
}
