package gcefake

import (
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"sort"
	"strings"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Routes, for the calls the gcp provider makes in network mode routed:
// global routes insert, get and delete (through global operations). As
// GCE does, names are unique per project, a route's next hop instance
// must exist when it is inserted, and it must forward (canIpForward) for
// the route to carry anything (the fake refuses one that does not, so a
// test sees the mistake).

func (s *Server) routeRoutes(m *http.ServeMux) {
	global := "/compute/v1/projects/{project}/global"
	m.HandleFunc("POST "+global+"/routes", s.insertRoute)
	m.HandleFunc("GET "+global+"/routes/{name}", s.getRoute)
	m.HandleFunc("DELETE "+global+"/routes/{name}", s.deleteRoute)
}

// FailRouteInserts makes the next route inserts answer these HTTP
// statuses (403, 429...).
func (s *Server) FailRouteInserts(statuses ...int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failRoutes = append(s.failRoutes, statuses...)
}

// Routes are copies of the routes, by name.
func (s *Server) Routes() []*computepb.Route {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*computepb.Route, 0, len(s.routes))
	for _, r := range s.routes {
		out = append(out, proto.Clone(r).(*computepb.Route))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetName() < out[j].GetName() })
	return out
}

func (s *Server) insertRoute(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	route := &computepb.Route{}
	if err := protojson.Unmarshal(body, route); err != nil {
		writeError(w, 400, "Invalid JSON payload received. "+err.Error(), "invalid")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.failRoutes) > 0 {
		status := s.failRoutes[0]
		s.failRoutes = s.failRoutes[1:]
		writeError(w, status, "injected by gcefake", map[int]string{403: "forbidden", 429: "rateLimitExceeded"}[status])
		return
	}
	if dst, err := netip.ParsePrefix(route.GetDestRange()); err != nil || dst.Masked() != dst {
		writeError(w, 400, fmt.Sprintf("Invalid value for field 'resource.destRange': '%s'.", route.GetDestRange()), "invalid")
		return
	}
	switch {
	case !nameRe.MatchString(route.GetName()):
		writeError(w, 400, fmt.Sprintf("Invalid value for field 'resource.name': '%s'.", route.GetName()), "invalid")
		return
	case route.GetNetwork() == "" || route.GetNextHopInstance() == "":
		writeError(w, 400, "Required field 'resource.network' or 'resource.nextHopInstance' not specified", "required")
		return
	case s.routes[route.GetName()] != nil:
		writeError(w, 409, fmt.Sprintf("The resource 'projects/%s/global/routes/%s' already exists", r.PathValue("project"), route.GetName()), "alreadyExists")
		return
	}
	hop := route.GetNextHopInstance()
	i := strings.Index(hop, "zones/")
	in, ok := s.instances[strings.Replace(strings.TrimPrefix(hop[max(i, 0):], "zones/"), "/instances/", "/", 1)]
	if i < 0 || !ok {
		writeError(w, 400, fmt.Sprintf("The resource '%s' was not found", hop), "notFound")
		return
	}
	if !in.GetCanIpForward() {
		writeError(w, 400, fmt.Sprintf("Invalid value for field 'resource.nextHopInstance': '%s'. The instance does not have canIpForward set.", hop), "invalid")
		return
	}
	s.seq++
	route.Id = proto.Uint64(uint64(8000000000000000000 + s.seq))
	s.routes[route.GetName()] = route
	writeProto(w, s.newOp("insert", "", route.GetName()))
}

func (s *Server) getRoute(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	route, ok := s.routes[r.PathValue("name")]
	if !ok {
		writeError(w, 404, fmt.Sprintf("The resource 'projects/%s/global/routes/%s' was not found", r.PathValue("project"), r.PathValue("name")), "notFound")
		return
	}
	writeProto(w, route)
}

func (s *Server) deleteRoute(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	name := r.PathValue("name")
	if s.routes[name] == nil {
		writeError(w, 404, fmt.Sprintf("The resource 'projects/%s/global/routes/%s' was not found", r.PathValue("project"), name), "notFound")
		return
	}
	delete(s.routes, name)
	writeProto(w, s.newOp("delete", "", name))
}
