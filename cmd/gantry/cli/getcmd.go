package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
		Use:   "get (KIND[,KIND...] [NAME...] | KIND/NAME... | all)",
		Short: "List resources, or show some",
		Long: "List resources, or show some. Kinds: " + strings.Join(kindNames, ", ") + " (short names: " + shortNames() + "); " +
			"all lists " + strings.Join(allKinds, ", ") + ". KIND/NAME is what -o name prints.",
		Args: func(cmd *cobra.Command, args []string) error {
			_, err := parseTargets(args)
			return err
		},
		ValidArgsFunction: completeKindThenName(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(o.output); err != nil {
				return err
			}
			if o.chunkSize < 0 {
				return fmt.Errorf("--chunk-size %d: want 0 (one request) or more", o.chunkSize)
			}
			targets, err := parseTargets(args)
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
			query := func(kind, name string) *getQuery {
				return &getQuery{g: g, c: c, kind: kind, name: name, opts: o, selector: sel}
			}
			single := len(targets) == 1 && len(targets[0].names) <= 1
			if o.watch && !single {
				return fmt.Errorf("-w watches one kind (or one object of it)")
			}
			if !single {
				return getMany(cmd.Context(), g, o, targets, query)
			}
			name := ""
			if len(targets[0].names) == 1 {
				name = targets[0].names[0]
			}
			q := query(targets[0].kind, name)
			if o.watch {
				return q.watchLoop(cmd.Context())
			}
			return q.once(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.output, "output", "o", formatTable, "output format: table, wide, json, yaml, name, jsonpath=TEMPLATE or custom-columns=HEADER:FIELD,...")
	f.StringVarP(&o.selector, "selector", "l", "", "label selector (key=value, key!=value, key, !key, key in (a,b); comma-separated)")
	f.StringVar(&o.sortBy, "sort-by", "", "sort by a JSONPath field, such as .metadata.name or {.status.running}")
	f.BoolVar(&o.noHeaders, "no-headers", false, "print table rows without the header")
	f.BoolVarP(&o.watch, "watch", "w", false, "after the list, print each change as it happens")
	f.DurationVar(&o.since, "since", 0, "events: only those newer than this (such as 10m)")
	f.IntVar(&o.chunkSize, "chunk-size", defaultChunkSize, "read machines and replicas this many at a time, all at one revision (0: in one request)")
	f.DurationVar(&o.poll, "poll-interval", time.Second, "how often -w reads events and secrets (the other kinds are watched, not polled)")
	return cmd
}

// getMany prints several kinds, or several objects: one table per kind
// (names written KIND/NAME when there are several kinds, as kubectl
// does), or one list of them all for structured output.
func getMany(ctx context.Context, g *globals, o getOptions, targets []target, query func(kind, name string) *getQuery) error {
	var all []item
	tables := 0
	for _, t := range targets {
		names := t.names
		if len(names) == 0 {
			names = []string{""}
		}
		var items []item
		for _, name := range names {
			got, err := query(t.kind, name).fetch(ctx)
			if err != nil {
				return fmt.Errorf("%s: %w", t.kind, err)
			}
			items = append(items, got...)
		}
		q := query(t.kind, "")
		if !isRowFormat(o.output) {
			all = append(all, items...)
			continue
		}
		if len(items) == 0 {
			continue
		}
		if tables > 0 && o.output != formatName {
			fmt.Fprintln(g.out)
		}
		tables++
		if err := q.printRows(items, true, len(targets) > 1); err != nil {
			return err
		}
	}
	if isRowFormat(o.output) {
		if tables == 0 {
			fmt.Fprintln(g.errOut, "No resources found.")
		}
		return nil
	}
	return query("", "").print(all, true)
}

type getQuery struct {
	g        *globals
	c        *client.Client
	kind     string
	name     string
	opts     getOptions
	selector labels.Selector
	afterID  int64 // events: the newest seen
	// widths are the columns' widths as printed so far (watch updates
	// line up under the first table).
	widths []int
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
	strict := jsonpath.New("sort-by")
	_ = strict.Parse(expr)
	keys := make([]string, len(items))
	found := false
	for i, it := range items {
		var buf bytes.Buffer
		if err := jp.Execute(&buf, it.tree); err != nil {
			return fmt.Errorf("--sort-by %q: %w", q.opts.sortBy, err)
		}
		keys[i] = buf.String()
		found = found || strict.Execute(io.Discard, it.tree) == nil
	}
	if len(items) > 0 && !found {
		return fmt.Errorf("--sort-by %q: no %s has this field (see gantry get %s -o json for the fields)", q.opts.sortBy, singular(q.kind), q.kind)
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

// isRowFormat says whether a format prints rows of a table (or names),
// one table per kind, rather than one document of every item.
func isRowFormat(format string) bool {
	return format == formatTable || format == formatWide || format == formatName || strings.HasPrefix(format, formatCustomColumns)
}

// print writes items in the chosen format; header says whether a table
// gets its header (not on watch updates).
func (q *getQuery) print(items []item, header bool) error {
	out, format := q.g.out, q.opts.output
	switch {
	case format == formatJSON || format == formatYAML:
		if q.name != "" && len(items) == 1 {
			return printStructured(out, format, items[0].tree)
		}
		trees := make([]any, len(items))
		for i, it := range items {
			trees[i] = it.tree
		}
		return printStructured(out, format, map[string]any{"items": trees})
	case strings.HasPrefix(format, formatJSONPath):
		return printJSONPath(q.g, strings.TrimPrefix(format, formatJSONPath), q.name != "", items)
	}
	if len(items) == 0 && header {
		if q.opts.watch {
			return nil
		}
		fmt.Fprintf(q.g.errOut, "No %s found.\n", q.kind)
		return nil
	}
	return q.printRows(items, header, false)
}

// printRows prints items as a table (or names, or custom columns);
// withKind writes each name as KIND/NAME. The columns keep the widths
// they had before, so the rows of a watch stay under their header.
func (q *getQuery) printRows(items []item, header, withKind bool) error {
	out, format := q.g.out, q.opts.output
	if format == formatName {
		for _, it := range items {
			fmt.Fprintf(out, "%s/%s\n", singular(q.kind), it.name)
		}
		return nil
	}
	var t *table
	if spec, ok := strings.CutPrefix(format, formatCustomColumns); ok {
		var err error
		if t, err = customColumns(spec, items); err != nil {
			return err
		}
	} else {
		objs := make([]any, len(items))
		for i, it := range items {
			objs[i] = it.obj
		}
		t = tableOf(q.kind, objs)
	}
	if withKind {
		for _, row := range t.rows {
			row[0] = singular(q.kind) + "/" + row[0]
		}
	}
	t.noHeader = q.opts.noHeaders || !header
	q.widths = t.printWidths(out, format == formatWide, q.widths)
	return nil
}

func printJSONPath(g *globals, template string, single bool, items []item) error {
	jp := jsonpath.New("output")
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
	var buf bytes.Buffer
	if err := jp.Execute(&buf, data); err != nil {
		return fmt.Errorf("-o jsonpath=%s: %w", template, err)
	}
	buf.WriteString("\n")
	_, err := g.out.Write(buf.Bytes())
	return err
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
	decorate(obj, m)
	return m, nil
}

// decorate gives the observed kinds, whose API objects are flat, the
// fields scripts reach for on every kind: kind and metadata.name (and a
// replica's URL), so `{.items[*].metadata.name}` works on all of them.
func decorate(obj any, tree map[string]any) {
	meta := func(name string, revision int64) map[string]any {
		m := map[string]any{"name": name}
		if revision > 0 {
			m["resourceVersion"] = fmt.Sprint(revision)
		}
		return m
	}
	switch o := obj.(type) {
	case api.Replica:
		tree["kind"], tree["metadata"] = "Replica", meta(o.ID, o.ResourceVersion)
		if u := o.URL(); u != "" {
			tree["url"] = u
		}
	case api.Machine:
		tree["kind"], tree["metadata"] = "Machine", meta(o.ID, o.ResourceVersion)
	}
}
