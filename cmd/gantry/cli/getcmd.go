package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/client"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/util/jsonpath"
)

// getOptions are get's flags, in kubectl's habits.
type getOptions struct {
	output    string
	selector  string
	sortBy    string
	noHeaders bool
	watch     bool
	since     time.Duration
	poll      time.Duration
	chunkSize int
}

// defaultChunkSize is kubectl's: machines and replicas are read 500 at a
// time.
const defaultChunkSize = 500

func newGetCmd(g *globals) *cobra.Command {
	var o getOptions
	cmd := &cobra.Command{
		Use:               "get (clusters|services|machines|replicas|events|secrets|failovergroups|endpoints) [NAME]",
		Short:             "List resources, or show one",
		Args:              cobra.RangeArgs(1, 2),
		ValidArgsFunction: completeKindThenName(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(o.output); err != nil {
				return err
			}
			if o.chunkSize < 0 {
				return fmt.Errorf("--chunk-size %d: want 0 (one request) or more", o.chunkSize)
			}
			kind, err := canonicalKind(args[0])
			if err != nil {
				return err
			}
			sel, err := labels.Parse(o.selector)
			if err != nil {
				return fmt.Errorf("--selector %q: %w", o.selector, err)
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			name := ""
			if len(args) == 2 {
				name = args[1]
			}
			q := &getQuery{g: g, c: c, kind: kind, name: name, opts: o, selector: sel}
			if o.watch {
				return q.watchLoop(cmd.Context())
			}
			return q.once(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.output, "output", "o", formatTable, "output format: table, wide, json, yaml, name or jsonpath=TEMPLATE")
	f.StringVarP(&o.selector, "selector", "l", "", "label selector (key=value, key!=value, key, !key, key in (a,b); comma-separated)")
	f.StringVar(&o.sortBy, "sort-by", "", "sort by a JSONPath field, such as .metadata.name or {.status.running}")
	f.BoolVar(&o.noHeaders, "no-headers", false, "print table rows without the header")
	f.BoolVarP(&o.watch, "watch", "w", false, "after the list, print each change as it happens")
	f.DurationVar(&o.since, "since", 0, "events: only those newer than this (such as 10m)")
	f.IntVar(&o.chunkSize, "chunk-size", defaultChunkSize, "read machines and replicas this many at a time, all at one revision (0: in one request)")
	f.DurationVar(&o.poll, "poll-interval", time.Second, "how often -w reads events and secrets (the other kinds are watched, not polled)")
	return cmd
}

type getQuery struct {
	g        *globals
	c        *client.Client
	kind     string
	name     string
	opts     getOptions
	selector labels.Selector
	afterID  int64 // events: the newest seen
}

// item is one object as fetched, with the tree the selector, sort and
// jsonpath read.
type item struct {
	obj  any
	tree map[string]any
	name string
}

func (q *getQuery) fetch(ctx context.Context) ([]item, error) {
	objs, err := fetchObjects(ctx, q.c, q.kind, q.name, q.afterID, q.opts.chunkSize)
	if err != nil {
		return nil, err
	}
	serviceLabels, err := q.serviceLabels(ctx)
	if err != nil {
		return nil, err
	}
	return q.items(objs, serviceLabels)
}

// items are the objects the selector (and --since) keeps, sorted.
func (q *getQuery) items(objs []any, serviceLabels map[string]labels.Set) ([]item, error) {
	var out []item
	for _, obj := range objs {
		tree, err := toTree(obj)
		if err != nil {
			return nil, err
		}
		it := item{obj: obj, tree: tree, name: objectName(obj)}
		set := labels.Set(labelsOf(obj))
		if r, ok := obj.(api.Replica); ok {
			set = labels.Merge(serviceLabels[r.Service], set)
		}
		if !q.selector.Matches(set) {
			continue
		}
		if e, ok := obj.(api.Event); ok {
			q.afterID = max(q.afterID, e.ID)
			if q.opts.since > 0 && time.Since(e.Time) > q.opts.since {
				continue
			}
		}
		out = append(out, it)
	}
	return out, q.sort(out)
}

// serviceLabels are the labels of every service, by name, when a
// selector is matched against replicas (they carry their service's).
func (q *getQuery) serviceLabels(ctx context.Context) (map[string]labels.Set, error) {
	if q.kind != "replicas" || q.selector.Empty() {
		return nil, nil
	}
	services, err := q.c.ListServices(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]labels.Set{}
	for _, s := range services {
		out[s.Metadata.Name] = s.Metadata.Labels
	}
	return out, nil
}

// sort orders by --sort-by, else by name in natural order (web-2 before
// web-10); events stay in time order.
func (q *getQuery) sort(items []item) error {
	if q.opts.sortBy == "" {
		if q.kind != "events" {
			sort.SliceStable(items, func(i, j int) bool { return naturalLess(items[i].name, items[j].name) })
		}
		return nil
	}
	expr := q.opts.sortBy
	if !strings.HasPrefix(expr, "{") {
		expr = "{" + expr + "}"
	}
	jp := jsonpath.New("sort-by").AllowMissingKeys(true)
	if err := jp.Parse(expr); err != nil {
		return fmt.Errorf("--sort-by %q: %w", q.opts.sortBy, err)
	}
	keys := make([]string, len(items))
	for i, it := range items {
		var buf bytes.Buffer
		if err := jp.Execute(&buf, it.tree); err != nil {
			return fmt.Errorf("--sort-by %q: %w", q.opts.sortBy, err)
		}
		keys[i] = buf.String()
	}
	idx := make([]int, len(items))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return naturalLess(keys[idx[a]], keys[idx[b]]) })
	sorted := make([]item, len(items))
	for i, k := range idx {
		sorted[i] = items[k]
	}
	copy(items, sorted)
	return nil
}

func (q *getQuery) once(ctx context.Context) error {
	if q.streams() {
		return q.stream(ctx)
	}
	items, err := q.fetch(ctx)
	if err != nil {
		return err
	}
	return q.print(items, true)
}

// print writes items in the chosen format; header says whether a table
// gets its header (not on watch updates).
func (q *getQuery) print(items []item, header bool) error {
	out, format := q.g.out, q.opts.output
	switch {
	case format == formatJSON || format == formatYAML:
		if q.name != "" && len(items) == 1 {
			return printStructured(out, format, items[0].obj)
		}
		objs := make([]any, len(items))
		for i, it := range items {
			objs[i] = it.obj
		}
		return printStructured(out, format, map[string]any{"items": api.NonNil(objs)})
	case format == formatName:
		for _, it := range items {
			fmt.Fprintf(out, "%s/%s\n", strings.TrimSuffix(q.kind, "s"), it.name)
		}
		return nil
	case strings.HasPrefix(format, formatJSONPath):
		return printJSONPath(q.g, strings.TrimPrefix(format, formatJSONPath), q.name != "", items)
	}
	objs := make([]any, len(items))
	for i, it := range items {
		objs[i] = it.obj
	}
	t := tableOf(q.kind, objs)
	if len(t.rows) == 0 && header {
		if q.opts.watch {
			return nil
		}
		fmt.Fprintf(q.g.errOut, "No %s found.\n", q.kind)
		return nil
	}
	t.noHeader = q.opts.noHeaders || !header
	return t.print(out, format == formatWide)
}

func printJSONPath(g *globals, template string, single bool, items []item) error {
	jp := jsonpath.New("output").AllowMissingKeys(true)
	if err := jp.Parse(template); err != nil {
		return fmt.Errorf("-o jsonpath: %w", err)
	}
	var data any
	if single && len(items) == 1 {
		data = items[0].tree
	} else {
		list := make([]any, len(items))
		for i, it := range items {
			list[i] = it.tree
		}
		data = map[string]any{"items": list}
	}
	if err := jp.Execute(g.out, data); err != nil {
		return fmt.Errorf("-o jsonpath: %w", err)
	}
	fmt.Fprintln(g.out)
	return nil
}

// watchedPaths are the lists whose changes can change a kind's rows (a
// service's counts come from its replicas, a machine's allocation from
// the replicas on it); none for the kinds outside the change feed.
func watchedPaths(kind string) []string {
	switch kind {
	case "clusters":
		return []string{"/v1/clusters", "/v1/machines"}
	case "services", "endpoints":
		return []string{"/v1/services", "/v1/replicas"}
	case "machines":
		return []string{"/v1/machines", "/v1/replicas"}
	case "replicas":
		return []string{"/v1/replicas", "/v1/services"}
	case "failovergroups":
		return []string{"/v1/failovergroups", "/v1/replicas", "/v1/machines"}
	}
	return nil
}

// watchLoop prints the list, then each object whose row (or, for
// structured output, content) changes: it reads again when the server's
// change feed says something changed (events and secrets, outside the
// feed, every poll interval).
func (q *getQuery) watchLoop(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var feed <-chan struct{}
	if paths := watchedPaths(q.kind); paths != nil {
		feed = q.c.Changes(ctx, client.WatchOptions{}, paths...)
	}
	seen := map[string]string{}
	first := true
	for {
		items, err := q.fetch(ctx)
		if err != nil && !errors.Is(ctx.Err(), context.Canceled) {
			return err
		}
		var changed []item
		for _, it := range items {
			key := stateKey(it)
			if seen[it.name] != key || q.kind == "events" {
				changed = append(changed, it)
				seen[it.name] = key
			}
		}
		if first || len(changed) > 0 {
			if err := q.print(changed, first); err != nil {
				return err
			}
		}
		first = false
		if err := waitForChange(ctx, feed, q.opts.poll); err != nil {
			return nil
		}
	}
}

// waitForChange returns at the next change, or after poll when there is
// no feed to follow; an error when ctx ends.
func waitForChange(ctx context.Context, changed <-chan struct{}, poll time.Duration) error {
	var timer <-chan time.Time
	if changed == nil {
		timer = time.After(poll)
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-changed:
	case <-timer:
	}
	return nil
}

// stateKey is an object's content without the times that change by
// themselves (heartbeats, ages).
func stateKey(it item) string {
	tree := map[string]any{}
	for k, v := range it.tree {
		if k != "lastHeartbeat" && k != "updatedAt" {
			tree[k] = v
		}
	}
	data, _ := json.Marshal(tree)
	return string(data)
}

// naturalLess orders strings with their digit runs as numbers.
func naturalLess(a, b string) bool {
	for a != "" && b != "" {
		da, db := digitPrefix(a), digitPrefix(b)
		if da != "" && db != "" {
			na, nb := strings.TrimLeft(da, "0"), strings.TrimLeft(db, "0")
			if len(na) != len(nb) {
				return len(na) < len(nb)
			}
			if na != nb {
				return na < nb
			}
			a, b = a[len(da):], b[len(db):]
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

func digitPrefix(s string) string {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return s[:i]
}

// toTree is an object as the API's JSON.
func toTree(obj any) (map[string]any, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	tree, err := jsonTree(data)
	if err != nil {
		return nil, err
	}
	m, _ := tree.(map[string]any)
	return m, nil
}
