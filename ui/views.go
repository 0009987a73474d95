package ui

import (
	"bytes"
	"context"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/client"
	"github.com/gantry-dev/gantry/spec"
)

// view is one page: the template that renders its body and what it reads.
type view struct {
	template, title, nav string
	load                 func(ctx context.Context, c *client.Client, q url.Values, d *Dashboard) (any, error)
}

// feeds are the lists whose changes can change a view (none for the
// views outside the change feed: events, cost and a replica's output,
// read every LiveInterval).
func (v view) feeds() []string {
	switch v.template {
	case "events", "cost", "replica", "charts":
		return nil
	}
	return []string{"/v1/clusters", "/v1/services", "/v1/failovergroups", "/v1/machines", "/v1/replicas"}
}

// live reports whether the page follows its body as it changes: not the
// simulate page, whose body is a simulation run when its form is sent.
func (v view) live() bool { return v.template != "simulate" }

// assets are the static files a view's page loads beyond the layout's:
// stylesheets, and scripts run after its body.
func (v view) assets() (styles, tail []string) {
	if v.template == "charts" {
		return []string{"uPlot.min.css"}, []string{"uPlot.iife.min.js", "charts.js"}
	}
	return nil, nil
}

// viewFor maps a path under /ui/ to its view.
func viewFor(path string) (view, bool) {
	path = strings.Trim(path, "/")
	if name, ok := strings.CutPrefix(path, "services/"); ok && name != "" && !strings.Contains(name, "/") {
		return view{"service", "Service " + name, "services", func(ctx context.Context, c *client.Client, q url.Values, d *Dashboard) (any, error) {
			return loadService(ctx, c, name, q, d.cfg.PageSize)
		}}, true
	}
	if id, ok := strings.CutPrefix(path, "replicas/"); ok && id != "" && !strings.Contains(id, "/") {
		return view{"replica", "Replica " + id, "replicas", func(ctx context.Context, c *client.Client, q url.Values, d *Dashboard) (any, error) {
			return loadReplica(ctx, c, id, q, d.cfg)
		}}, true
	}
	switch path {
	case "":
		return view{"clusters", "Clusters", "clusters", loadClusters}, true
	case "machines":
		return view{"machines", "Machines", "machines", loadMachines}, true
	case "topology":
		return view{"topology", "Topology", "topology", loadTopology}, true
	case "services":
		return view{"services", "Services", "services", loadServices}, true
	case "replicas":
		return view{"replicas", "Replicas", "replicas", loadReplicas}, true
	case "failover":
		return view{"failover", "Failover groups", "failover", loadFailover}, true
	case "events":
		return view{"events", "Events", "events", loadEvents}, true
	case "cost":
		return view{"cost", "Cost", "cost", loadCost}, true
	case "charts":
		return view{"charts", "Charts", "charts", loadCharts}, true
	case "simulate":
		return view{"simulate", "Simulate", "simulate", loadSimulate}, true
	}
	return view{}, false
}

// body renders a view's body for the request's query.
func (d *Dashboard) body(r *http.Request, c *client.Client, v view) (template.HTML, error) {
	data, err := v.load(r.Context(), c, r.URL.Query(), d)
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	if err := d.pages.ExecuteTemplate(&buf, v.template, struct {
		Now  time.Time
		Data any
	}{d.now(), data}); err != nil {
		return "", fmt.Errorf("render %s: %w", v.template, err)
	}
	return template.HTML(buf.String()), nil
}

// pager is one page of a table: rows From..To of Total, and the links to
// the pages beside it.
type pager struct {
	Page, Pages, From, To, Total int
	Prev, Next                   string
}

func paginate(total, size int, q url.Values, base string) (lo, hi int, p pager) {
	p = pager{Page: 1, Total: total, Pages: max(1, (total+size-1)/size)}
	if n, err := strconv.Atoi(q.Get("page")); err == nil && n > 1 {
		p.Page = min(n, p.Pages)
	}
	lo, hi = (p.Page-1)*size, min(total, p.Page*size)
	p.From, p.To = min(lo+1, total), hi
	link := func(page int) string {
		v := url.Values{}
		for k, vs := range q {
			v[k] = vs
		}
		v.Set("page", strconv.Itoa(page))
		return base + "?" + v.Encode()
	}
	if p.Page > 1 {
		p.Prev = link(p.Page - 1)
	}
	if p.Page < p.Pages {
		p.Next = link(p.Page + 1)
	}
	return lo, hi, p
}

type groupRow struct {
	api.GroupStatus
	MinSize, MaxSize int
	PerHour          float64
}

type clusterRow struct {
	Cluster  api.Cluster
	Groups   []groupRow
	Services []string
	PerHour  float64
}

func loadClusters(ctx context.Context, c *client.Client, _ url.Values, _ *Dashboard) (any, error) {
	clusters, err := c.ListClusters(ctx)
	if err != nil {
		return nil, err
	}
	machines, err := c.ListMachines(ctx, "")
	if err != nil {
		return nil, err
	}
	services, err := c.ListServices(ctx)
	if err != nil {
		return nil, err
	}
	cost := map[[2]string]float64{}
	for _, m := range machines {
		cost[[2]string{m.Cluster, m.Group}] += m.PricePerHour
	}
	servicesOf := map[string][]string{}
	for _, svc := range services {
		servicesOf[svc.Spec.Cluster] = append(servicesOf[svc.Spec.Cluster], svc.Metadata.Name)
	}
	rows := make([]clusterRow, 0, len(clusters))
	for _, cl := range clusters {
		row := clusterRow{Cluster: cl, Services: servicesOf[cl.Metadata.Name]}
		sort.Strings(row.Services)
		sizes := map[string]api.CapacityGroup{}
		for _, g := range cl.Spec.CapacityGroups {
			sizes[g.GroupID] = g
		}
		if cl.Status != nil {
			for _, g := range cl.Status.Groups {
				perHour := cost[[2]string{cl.Metadata.Name, g.GroupID}]
				row.Groups = append(row.Groups, groupRow{g, sizes[g.GroupID].MinSize, sizes[g.GroupID].MaxSize, perHour})
				row.PerHour += perHour
			}
		}
		rows = append(rows, row)
	}
	return rows, nil
}

type machinesPage struct {
	Cluster  string
	Machines []api.Machine
	Pager    pager
}

// loadMachines reads only the page shown, and how many machines there
// are, from the API (a fleet's machines are too many to read whole for
// each page): in the store's order, by id.
func loadMachines(ctx context.Context, c *client.Client, q url.Values, d *Dashboard) (any, error) {
	cluster := q.Get("cluster")
	machines, p, err := window(q, d.cfg.PageSize, "/ui/machines", func(offset, limit int) ([]api.Machine, int, error) {
		return c.ListMachinesWindow(ctx, cluster, offset, limit)
	})
	return machinesPage{Cluster: cluster, Machines: machines, Pager: p}, err
}

// window reads the numbered page q asks for through read (a page of
// limit after offset, and the list's size); past the last page, the last.
func window[T any](q url.Values, size int, base string, read func(offset, limit int) ([]T, int, error)) ([]T, pager, error) {
	page := 1
	if n, err := strconv.Atoi(q.Get("page")); err == nil && n > 1 {
		page = n
	}
	items, total, err := read((page-1)*size, size)
	if err != nil {
		return nil, pager{}, err
	}
	lo, _, p := paginate(total, size, q, base)
	if lo != (page-1)*size {
		if items, total, err = read(lo, size); err != nil {
			return nil, pager{}, err
		}
		_, _, p = paginate(total, size, q, base)
	}
	return items, p, nil
}

func loadServices(ctx context.Context, c *client.Client, _ url.Values, _ *Dashboard) (any, error) {
	services, err := c.ListServices(ctx)
	if err != nil {
		return nil, err
	}
	sort.Slice(services, func(i, j int) bool { return services[i].Metadata.Name < services[j].Metadata.Name })
	return services, nil
}

type servicePage struct {
	Service  *api.Service
	Rollout  *api.Rollout
	Replicas []api.Replica
	Pager    pager
	// Current is the revision the service runs (0 before the control
	// loop saw it).
	Current int64
	// From and To are the revisions compared (?from=&to=); Changes what
	// changed between them, DiffError why they could not be compared.
	From, To  int64
	Changes   []string
	DiffError string
}

func loadService(ctx context.Context, c *client.Client, name string, q url.Values, size int) (any, error) {
	svc, err := c.GetService(ctx, name)
	if err != nil {
		return nil, err
	}
	rollout, err := c.Rollout(ctx, name)
	if err != nil {
		return nil, err
	}
	replicas, err := c.ListReplicas(ctx, name)
	if err != nil {
		return nil, err
	}
	sortReplicas(replicas)
	lo, hi, p := paginate(len(replicas), size, q, "/ui/services/"+url.PathEscape(name))
	page := servicePage{Service: svc, Rollout: rollout, Replicas: replicas[lo:hi], Pager: p}
	if svc.Status != nil {
		page.Current = svc.Status.Revision
	}
	compareRevisions(&page, q)
	return page, nil
}

// compareRevisions fills in the changes between the revisions q names
// (from, to); with none named, the form offers the current revision
// against the one before it.
func compareRevisions(page *servicePage, q url.Values) {
	from, errFrom := strconv.ParseInt(q.Get("from"), 10, 64)
	to, errTo := strconv.ParseInt(q.Get("to"), 10, 64)
	if q.Get("from") == "" && q.Get("to") == "" {
		page.To = page.Current
		for _, r := range page.Rollout.Revisions {
			if r.Number < page.To && r.Number > page.From {
				page.From = r.Number
			}
		}
		return
	}
	page.From, page.To = from, to
	if errFrom != nil || errTo != nil {
		page.DiffError = "from, to: want two revision numbers"
		return
	}
	changes, err := spec.RevisionChanges(page.Rollout, from, to)
	if err != nil {
		page.DiffError = err.Error()
		return
	}
	if page.Changes = changes; len(changes) == 0 {
		page.Changes = []string{"(the two revisions' specs are the same)"}
	}
}

type replicasPage struct {
	State    string
	Machine  string
	Replicas []api.Replica
	Pager    pager
}

func loadReplicas(ctx context.Context, c *client.Client, q url.Values, d *Dashboard) (any, error) {
	if q.Get("state") == "" {
		return replicasWindow(ctx, c, q, d)
	}
	replicas, err := c.ListReplicas(ctx, q.Get("service"))
	if err != nil {
		return nil, err
	}
	if state := q.Get("state"); state != "" {
		kept := replicas[:0]
		for _, r := range replicas {
			if string(r.State) == state && (q.Get("machine") == "" || r.Machine == q.Get("machine")) {
				kept = append(kept, r)
			}
		}
		replicas = kept
	}
	sortReplicas(replicas)
	lo, hi, p := paginate(len(replicas), d.cfg.PageSize, q, "/ui/replicas")
	return replicasPage{State: q.Get("state"), Machine: q.Get("machine"), Replicas: replicas[lo:hi], Pager: p}, nil
}

// replicasWindow reads only the page shown, and how many replicas there
// are, from the API (a fleet's replicas are too many to read whole for
// each page): in the store's order, by service and id.
func replicasWindow(ctx context.Context, c *client.Client, q url.Values, d *Dashboard) (any, error) {
	query := client.ReplicaQuery{Service: q.Get("service"), Machine: q.Get("machine")}
	replicas, p, err := window(q, d.cfg.PageSize, "/ui/replicas", func(offset, limit int) ([]api.Replica, int, error) {
		return c.ListReplicasWindow(ctx, query, offset, limit)
	})
	return replicasPage{Machine: query.Machine, Replicas: replicas, Pager: p}, err
}

func sortReplicas(replicas []api.Replica) {
	sort.Slice(replicas, func(i, j int) bool {
		if replicas[i].Service != replicas[j].Service {
			return replicas[i].Service < replicas[j].Service
		}
		return replicas[i].Index < replicas[j].Index
	})
}

func loadFailover(ctx context.Context, c *client.Client, _ url.Values, _ *Dashboard) (any, error) {
	return c.ListFailoverGroups(ctx)
}

type eventsPage struct {
	Kind, Name, Type, Reason string
	Events                   []api.Event
	Pager                    pager
}

// loadEvents reads the latest events, newest first; kind and name filter
// in the API, type and reason here.
func loadEvents(ctx context.Context, c *client.Client, q url.Values, d *Dashboard) (any, error) {
	page := eventsPage{Kind: q.Get("kind"), Name: q.Get("name"), Type: q.Get("type"), Reason: q.Get("reason")}
	events, err := c.ListEvents(ctx, client.EventQuery{Kind: page.Kind, Name: page.Name, Limit: d.cfg.EventLimit})
	if err != nil {
		return nil, err
	}
	var kept []api.Event
	for i := len(events) - 1; i >= 0; i-- {
		e := events[i]
		if (page.Type == "" || e.Type == page.Type) && (page.Reason == "" || strings.EqualFold(e.Reason, page.Reason)) {
			kept = append(kept, e)
		}
	}
	lo, hi, p := paginate(len(kept), d.cfg.PageSize, q, "/ui/events")
	page.Events, page.Pager = kept[lo:hi], p
	return page, nil
}

func loadCost(ctx context.Context, c *client.Client, _ url.Values, _ *Dashboard) (any, error) {
	return c.Cost(ctx)
}

// loadCharts reads the server's samples of the fleet; charts.js draws
// them (uPlot) from the JSON the page carries.
func loadCharts(ctx context.Context, c *client.Client, _ url.Values, _ *Dashboard) (any, error) {
	return c.History(ctx)
}
