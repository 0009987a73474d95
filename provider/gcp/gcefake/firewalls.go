package gcefake

import (
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Firewall rules and subnetworks, for the calls the gcp provider makes to
// open the overlay's WireGuard port between a cluster's machines: global
// firewalls insert, list and delete (through global operations), and
// subnetworks get (a subnetwork's network). Names are unique per project.

func (s *Server) routeFirewalls(m *http.ServeMux) {
	global := "/compute/v1/projects/{project}/global"
	m.HandleFunc("POST "+global+"/firewalls", s.insertFirewall)
	m.HandleFunc("GET "+global+"/firewalls", s.listFirewalls)
	m.HandleFunc("DELETE "+global+"/firewalls/{name}", s.deleteFirewall)
	m.HandleFunc("GET "+global+"/operations/{op}", s.operation)
	m.HandleFunc("GET /compute/v1/projects/{project}/regions/{region}/subnetworks/{name}", s.getSubnetwork)
}

// AddSubnetwork declares a subnetwork of network in region.
func (s *Server) AddSubnetwork(region, name, network string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.subnetworks[region+"/"+name] = network
}

// Firewalls are copies of the firewall rules, by name.
func (s *Server) Firewalls() []*computepb.Firewall {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*computepb.Firewall, 0, len(s.firewalls))
	for _, f := range s.sortedFirewalls() {
		out = append(out, proto.Clone(f).(*computepb.Firewall))
	}
	return out
}

func (s *Server) sortedFirewalls() []*computepb.Firewall {
	out := make([]*computepb.Firewall, 0, len(s.firewalls))
	for _, f := range s.firewalls {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetName() < out[j].GetName() })
	return out
}

func (s *Server) insertFirewall(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f := &computepb.Firewall{}
	if err := protojson.Unmarshal(body, f); err != nil {
		writeError(w, 400, "Invalid JSON payload received. "+err.Error(), "invalid")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case !nameRe.MatchString(f.GetName()):
		writeError(w, 400, fmt.Sprintf("Invalid value for field 'resource.name': '%s'.", f.GetName()), "invalid")
		return
	case f.GetNetwork() == "" || len(f.GetAllowed()) == 0:
		writeError(w, 400, "Required field 'resource.network' or 'resource.allowed' not specified", "required")
		return
	case s.firewalls[f.GetName()] != nil:
		writeError(w, 409, fmt.Sprintf("The resource 'projects/%s/global/firewalls/%s' already exists", r.PathValue("project"), f.GetName()), "alreadyExists")
		return
	}
	for _, tag := range append(f.GetSourceTags(), f.GetTargetTags()...) {
		if !nameRe.MatchString(tag) {
			writeError(w, 400, fmt.Sprintf("Invalid value for field 'resource.sourceTags': '%s'.", tag), "invalid")
			return
		}
	}
	s.seq++
	f.Id = proto.Uint64(uint64(7000000000000000000 + s.seq))
	s.firewalls[f.GetName()] = f
	writeProto(w, s.newOp("insert", "", f.GetName()))
}

func (s *Server) listFirewalls(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	all := s.sortedFirewalls()
	start, _ := strconv.Atoi(r.URL.Query().Get("pageToken"))
	end := min(start+s.PageSize, len(all))
	out := &computepb.FirewallList{Items: all[min(start, end):end]}
	if end < len(all) {
		out.NextPageToken = proto.String(strconv.Itoa(end))
	}
	writeProto(w, out)
}

func (s *Server) deleteFirewall(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	name := r.PathValue("name")
	if s.firewalls[name] == nil {
		writeError(w, 404, fmt.Sprintf("The resource 'projects/%s/global/firewalls/%s' was not found", r.PathValue("project"), name), "notFound")
		return
	}
	delete(s.firewalls, name)
	writeProto(w, s.newOp("delete", "", name))
}

func (s *Server) getSubnetwork(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	region, name := r.PathValue("region"), r.PathValue("name")
	network, ok := s.subnetworks[region+"/"+name]
	if !ok {
		writeError(w, 404, fmt.Sprintf("The resource 'projects/%s/regions/%s/subnetworks/%s' was not found", r.PathValue("project"), region, name), "notFound")
		return
	}
	writeProto(w, &computepb.Subnetwork{Name: proto.String(name), Region: proto.String(region), Network: proto.String(network)})
}
