package ec2fake

import (
	"encoding/xml"
	"fmt"
	"net/netip"
	"net/url"
	"sort"
)

// Route tables and instance attributes, for the calls the aws provider
// makes in network mode routed: ModifyInstanceAttribute (source/dest
// check off), CreateRoute, ReplaceRoute, DeleteRoute and
// DescribeRouteTables. As EC2 does, a table holds one route per
// destination (CreateRoute of a taken one is RouteAlreadyExists; a route
// whose instance is terminated stays, as a blackhole, until deleted).

// Route is one route of a table, as a test may check it.
type Route struct {
	Destination, Instance string
}

type routeTable struct {
	ID, VPC string
	// routes by destination CIDR.
	routes map[string]string
}

// AddRouteTable declares a route table of vpc.
func (s *Server) AddRouteTable(id, vpc string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.routeTables == nil {
		s.routeTables = map[string]*routeTable{}
	}
	s.routeTables[id] = &routeTable{ID: id, VPC: vpc, routes: map[string]string{}}
}

// Routes lists a table's routes, by destination.
func (s *Server) Routes(table string) []Route {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.routeTables[table]
	if !ok {
		return nil
	}
	out := make([]Route, 0, len(t.routes))
	for dst, inst := range t.routes {
		out = append(out, Route{Destination: dst, Instance: inst})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Destination < out[j].Destination })
	return out
}

// SourceDestCheck says whether an instance checks source and destination
// (true until ModifyInstanceAttribute turns it off, as on EC2).
func (s *Server) SourceDestCheck(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.instances[id]
	return !ok || !in.NoSourceDestCheck
}

func (s *Server) modifyInstanceAttribute(form url.Values) (any, *apiError) {
	in, ok := s.instances[form.Get("InstanceId")]
	if !ok {
		return nil, &apiError{400, "InvalidInstanceID.NotFound", fmt.Sprintf("The instance ID '%s' does not exist", form.Get("InstanceId"))}
	}
	switch v := form.Get("SourceDestCheck.Value"); v {
	case "true", "false":
		in.NoSourceDestCheck = v == "false"
	default:
		return nil, &apiError{400, "InvalidParameterCombination", "the fake models SourceDestCheck.Value only"}
	}
	return returnResponse{XMLName: xml.Name{Local: "ModifyInstanceAttributeResponse"}, RequestID: "req-fake", Return: true}, nil
}

// routeRequest checks a route call's table, destination and (for create
// and replace) instance.
func (s *Server) routeRequest(form url.Values, needInstance bool) (*routeTable, string, string, *apiError) {
	t, ok := s.routeTables[form.Get("RouteTableId")]
	if !ok {
		return nil, "", "", &apiError{400, "InvalidRouteTableID.NotFound", fmt.Sprintf("The routeTable ID '%s' does not exist", form.Get("RouteTableId"))}
	}
	dst := form.Get("DestinationCidrBlock")
	if p, err := netip.ParsePrefix(dst); err != nil || p.Masked() != p {
		return nil, "", "", &apiError{400, "InvalidParameterValue", fmt.Sprintf("Value (%s) for parameter destinationCidrBlock is invalid", dst)}
	}
	id := form.Get("InstanceId")
	if !needInstance {
		return t, dst, "", nil
	}
	in, ok := s.instances[id]
	if !ok || in.State == "terminated" {
		return nil, "", "", &apiError{400, "InvalidInstanceID.NotFound", fmt.Sprintf("The instance ID '%s' does not exist", id)}
	}
	return t, dst, id, nil
}

func (s *Server) createRoute(form url.Values) (any, *apiError) {
	t, dst, id, err := s.routeRequest(form, true)
	if err != nil {
		return nil, err
	}
	if _, taken := t.routes[dst]; taken {
		return nil, &apiError{400, "RouteAlreadyExists", fmt.Sprintf("The route identified by %s already exists.", dst)}
	}
	t.routes[dst] = id
	return returnResponse{XMLName: xml.Name{Local: "CreateRouteResponse"}, RequestID: "req-fake", Return: true}, nil
}

func (s *Server) replaceRoute(form url.Values) (any, *apiError) {
	t, dst, id, err := s.routeRequest(form, true)
	if err != nil {
		return nil, err
	}
	if _, ok := t.routes[dst]; !ok {
		return nil, &apiError{400, "InvalidRoute.NotFound", fmt.Sprintf("no route with destination-cidr-block %s in route table %s", dst, t.ID)}
	}
	t.routes[dst] = id
	return returnResponse{XMLName: xml.Name{Local: "ReplaceRouteResponse"}, RequestID: "req-fake"}, nil
}

func (s *Server) deleteRoute(form url.Values) (any, *apiError) {
	t, dst, _, err := s.routeRequest(form, false)
	if err != nil {
		return nil, err
	}
	if _, ok := t.routes[dst]; !ok {
		return nil, &apiError{400, "InvalidRoute.NotFound", fmt.Sprintf("no route with destination-cidr-block %s in route table %s", dst, t.ID)}
	}
	delete(t.routes, dst)
	return returnResponse{XMLName: xml.Name{Local: "DeleteRouteResponse"}, RequestID: "req-fake"}, nil
}

func (s *Server) describeRouteTables(form url.Values) (any, *apiError) {
	out := routeTablesResponse{RequestID: "req-fake"}
	for _, id := range indexed(form, "RouteTableId") {
		t, ok := s.routeTables[id]
		if !ok {
			return nil, &apiError{400, "InvalidRouteTableID.NotFound", fmt.Sprintf("The routeTable ID '%s' does not exist", id)}
		}
		x := routeTableXML{ID: t.ID, VPC: t.VPC}
		dsts := make([]string, 0, len(t.routes))
		for dst := range t.routes {
			dsts = append(dsts, dst)
		}
		sort.Strings(dsts)
		for _, dst := range dsts {
			state := "active"
			if in, ok := s.instances[t.routes[dst]]; !ok || in.State == "terminated" {
				state = "blackhole"
			}
			x.Routes = append(x.Routes, routeXML{Destination: dst, Instance: t.routes[dst], State: state, Origin: "CreateRoute"})
		}
		out.Tables = append(out.Tables, x)
	}
	return out, nil
}

type routeXML struct {
	Destination string `xml:"destinationCidrBlock"`
	Instance    string `xml:"instanceId"`
	State       string `xml:"state"`
	Origin      string `xml:"origin"`
}

type routeTableXML struct {
	ID     string     `xml:"routeTableId"`
	VPC    string     `xml:"vpcId"`
	Routes []routeXML `xml:"routeSet>item"`
}

type routeTablesResponse struct {
	XMLName   xml.Name        `xml:"DescribeRouteTablesResponse"`
	RequestID string          `xml:"requestId"`
	Tables    []routeTableXML `xml:"routeTableSet>item"`
}
