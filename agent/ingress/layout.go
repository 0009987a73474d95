package ingress

import (
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	"github.com/gantry-dev/gantry/api"
)

// layout is what HAProxy is configured with: per exposed port, a
// backend of server slots, each holding one replica or free (in
// maintenance). A replica keeps its slot while it stays, so a change
// touches only the slots of the replicas that came or went.
type layout struct {
	routes []routeLayout // by port
}

type routeLayout struct {
	name     string
	port     int
	protocol string
	slots    []slot
}

type slot struct {
	replica string // "": free
	address string
	port    int
	weight  int
}

// maxWeight is HAProxy's largest server weight.
const maxWeight = 256

// plan places routes' backends in slots, keeping each replica of prev
// in its slot; a backend that outgrows its slots gets twice what it
// needs (at least room).
func plan(prev *layout, routes []api.IngressRoute, room int) *layout {
	sorted := append([]api.IngressRoute(nil), routes...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Port < sorted[j].Port })
	next := &layout{}
	for _, r := range sorted {
		next.routes = append(next.routes, planRoute(prev.route(r.Port, r.Protocol), r, room))
	}
	return next
}

func (l *layout) route(port int, protocol string) *routeLayout {
	if l == nil {
		return nil
	}
	for i := range l.routes {
		if l.routes[i].port == port && l.routes[i].protocol == protocol {
			return &l.routes[i]
		}
	}
	return nil
}

func planRoute(prev *routeLayout, r api.IngressRoute, room int) routeLayout {
	out := routeLayout{name: r.Name, port: r.Port, protocol: r.Protocol}
	size := max(room, 1)
	if prev != nil {
		size = len(prev.slots)
	}
	if len(r.Backends) > size {
		size = max(room, 2*len(r.Backends))
	}
	out.slots = make([]slot, size)
	wanted := map[string]api.IngressTarget{}
	for _, b := range r.Backends {
		wanted[b.Replica] = b
	}
	placed := map[string]bool{}
	var freedNow []int
	if prev != nil {
		for i, s := range prev.slots {
			if s.replica == "" {
				continue
			}
			if b, ok := wanted[s.replica]; ok && i < size {
				out.slots[i] = slotOf(b)
				placed[s.replica] = true
			} else if i < size {
				freedNow = append(freedNow, i)
			}
		}
	}
	// New replicas take the slots free before this change first, so a
	// slot whose replica just left is not given another at once.
	var free []int
	for i := range out.slots {
		if out.slots[i].replica == "" && !contains(freedNow, i) {
			free = append(free, i)
		}
	}
	free = append(free, freedNow...)
	for _, b := range r.Backends {
		if placed[b.Replica] {
			continue
		}
		out.slots[free[0]] = slotOf(b)
		free = free[1:]
	}
	return out
}

func contains(list []int, v int) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

func slotOf(b api.IngressTarget) slot {
	return slot{replica: b.Replica, address: b.Address, port: b.Port, weight: min(max(b.Weight, 1), maxWeight)}
}

// sameShape: the same ports, protocols and slot counts (what the runtime
// API cannot change).
func (l *layout) sameShape(o *layout) bool {
	if len(l.routes) != len(o.routes) {
		return false
	}
	for i, r := range l.routes {
		p := o.routes[i]
		if r.port != p.port || r.protocol != p.protocol || r.name != p.name || len(r.slots) != len(p.slots) {
			return false
		}
	}
	return true
}

// runtimeCommands turn prev's servers into next's (same shape): the
// servers that come or change first, then those that leave, so that a
// backend whose replicas are all replaced at once is never empty.
func runtimeCommands(prev, next *layout) []string {
	var cmds, leaving []string
	for i, r := range next.routes {
		for j, s := range r.slots {
			old := prev.routes[i].slots[j]
			if s == old {
				continue
			}
			server := backendName(r.port) + "/" + serverName(j)
			if s.replica == "" {
				leaving = append(leaving, "set server "+server+" state maint")
				continue
			}
			if s.address != old.address || s.port != old.port {
				cmds = append(cmds, fmt.Sprintf("set server %s addr %s port %d", server, s.address, s.port))
			}
			if s.weight != old.weight || old.replica == "" {
				cmds = append(cmds, fmt.Sprintf("set server %s weight %d", server, s.weight))
			}
			if old.replica == "" {
				cmds = append(cmds, "set server "+server+" state ready")
			}
		}
	}
	return append(cmds, leaving...)
}

func backendName(port int) string { return "exposed-" + strconv.Itoa(port) }
func serverName(slot int) string  { return "s" + strconv.Itoa(slot) }

// render is HAProxy's configuration for l.
func render(l *layout, cfg Config, adminSocket string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `# Written by the Gantry agent: changes are lost at the next one.
global
    master-worker
    stats socket %s mode 600 level admin expose-fd listeners
    stats timeout 30s

defaults
    timeout connect %dms
    timeout client %dms
    timeout server %dms
    retries %d
    option redispatch 1
`, adminSocket, cfg.ConnectTimeout.Milliseconds(), cfg.IdleTimeout.Milliseconds(), cfg.IdleTimeout.Milliseconds(), cfg.Retries)
	for _, r := range l.routes {
		fmt.Fprintf(&b, "\n# %s\nfrontend exposed-%d-in\n    mode %s\n    bind %s\n    default_backend %s\n",
			r.name, r.port, r.protocol, net.JoinHostPort(cfg.BindAddress, strconv.Itoa(r.port)), backendName(r.port))
		fmt.Fprintf(&b, "\nbackend %s\n    mode %s\n    balance roundrobin\n", backendName(r.port), r.protocol)
		if r.protocol == api.ExposeHTTP {
			b.WriteString("    option forwardfor\n    retry-on conn-failure empty-response response-timeout\n")
		}
		for i, s := range r.slots {
			if s.replica == "" {
				fmt.Fprintf(&b, "    server %s 127.0.0.1:9 weight 1 disabled\n", serverName(i))
				continue
			}
			fmt.Fprintf(&b, "    server %s %s weight %d  # %s\n", serverName(i), net.JoinHostPort(s.address, strconv.Itoa(s.port)), s.weight, s.replica)
		}
	}
	return b.String()
}
