// Package ec2fake is an in-process fake of the EC2 Query API, for the calls
// Gantry's aws provider makes: RunInstances, DescribeInstances,
// TerminateInstances, StopInstances, StartInstances and GetConsoleOutput,
// the security group calls of groups.go and the route calls of routes.go.
// It speaks the real wire format (form-encoded requests, XML responses and
// errors), so the real aws-sdk-go-v2 client runs against it unchanged. It
// models what makes EC2 hard: idempotency by client token, pagination,
// eventual consistency (a new instance is invisible to DescribeInstances
// for a while), states that move on over time, and injected errors.
package ec2fake

import (
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Server is the fake; serve it with httptest.NewServer.
type Server struct {
	// HiddenDescribes is how many DescribeInstances calls a new instance
	// misses before it shows (eventual consistency).
	HiddenDescribes int
	// PageSize bounds DescribeInstances pages when MaxResults is absent.
	PageSize int
	// Transitions is how many DescribeInstances calls an instance stays in
	// a passing state (pending, stopping, shutting-down).
	Transitions int
	// Console is every new instance's console output.
	Console string

	mu        sync.Mutex
	instances map[string]*instance
	order     []string
	tokens    map[string]string
	failures  map[string][]string
	calls     map[string]int
	last      map[string]url.Values
	seq       int
	groups    map[string]*group
	subnets   map[string][2]string // vpc, zone
	// routeTables by id (routes.go).
	routeTables map[string]*routeTable
}

type instance struct {
	ID, Type, Zone, State, Image, Subnet, UserData, Profile, Lifecycle, IP, Token string
	SecurityGroups                                                                []string
	Tags                                                                          map[string]string
	Launched                                                                      time.Time
	hidden, passing                                                               int
	Console                                                                       string
	// NoSourceDestCheck: ModifyInstanceAttribute turned the check off.
	NoSourceDestCheck bool
}

// New returns an empty fake.
func New() *Server {
	return &Server{PageSize: 5, Transitions: 1, instances: map[string]*instance{}, tokens: map[string]string{},
		failures: map[string][]string{}, calls: map[string]int{}, last: map[string]url.Values{}}
}

// Fail makes the next calls of action fail with these EC2 error codes, one
// per call.
func (s *Server) Fail(action string, codes ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures[action] = append(s.failures[action], codes...)
}

// Calls is how many times action was called.
func (s *Server) Calls(action string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[action]
}

// LastRequest is the form of the last call of action.
func (s *Server) LastRequest(action string) url.Values {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last[action]
}

// SetConsole sets an instance's console output.
func (s *Server) SetConsole(id, output string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if in, ok := s.instances[id]; ok {
		in.Console = output
	}
}

// Instance returns a copy of an instance's record (for assertions).
func (s *Server) Instance(id string) (Instance, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.instances[id]
	if !ok {
		return Instance{}, false
	}
	return Instance{ID: in.ID, Type: in.Type, Zone: in.Zone, State: in.State, Image: in.Image, Subnet: in.Subnet, UserData: in.UserData,
		Profile: in.Profile, Lifecycle: in.Lifecycle, SecurityGroups: in.SecurityGroups, Tags: in.Tags}, true
}

// Instance is what a test may check of an instance.
type Instance struct {
	ID, Type, Zone, State, Image, Subnet, UserData, Profile, Lifecycle string
	SecurityGroups                                                     []string
	Tags                                                               map[string]string
}

// ServeHTTP answers one Query API call.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		writeError(w, http.StatusBadRequest, "MalformedQueryString", err.Error())
		return
	}
	action := r.Form.Get("Action")
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[action]++
	s.last[action] = r.Form
	if codes := s.failures[action]; len(codes) > 0 {
		s.failures[action] = codes[1:]
		writeError(w, statusOf(codes[0]), codes[0], "injected by ec2fake")
		return
	}
	var resp any
	var err *apiError
	switch action {
	case "RunInstances":
		resp, err = s.runInstances(r.Form)
	case "DescribeInstances":
		resp, err = s.describeInstances(r.Form)
	case "TerminateInstances":
		resp, err = s.changeState(r.Form, "TerminateInstancesResponse", "shutting-down")
	case "StopInstances":
		resp, err = s.changeState(r.Form, "StopInstancesResponse", "stopping")
	case "StartInstances":
		resp, err = s.changeState(r.Form, "StartInstancesResponse", "pending")
	case "GetConsoleOutput":
		resp, err = s.consoleOutput(r.Form)
	case "ModifyInstanceAttribute":
		resp, err = s.modifyInstanceAttribute(r.Form)
	case "CreateRoute":
		resp, err = s.createRoute(r.Form)
	case "ReplaceRoute":
		resp, err = s.replaceRoute(r.Form)
	case "DeleteRoute":
		resp, err = s.deleteRoute(r.Form)
	case "DescribeRouteTables":
		resp, err = s.describeRouteTables(r.Form)
	case "DescribeSubnets":
		resp, err = s.describeSubnets(r.Form)
	case "CreateSecurityGroup":
		resp, err = s.createSecurityGroup(r.Form)
	case "AuthorizeSecurityGroupIngress":
		resp, err = s.authorizeIngress(r.Form)
	case "DescribeSecurityGroups":
		resp, err = s.describeSecurityGroups(r.Form)
	case "DeleteSecurityGroup":
		resp, err = s.deleteSecurityGroup(r.Form)
	default:
		err = &apiError{http.StatusBadRequest, "InvalidAction", "The action " + action + " is not valid for this web service."}
	}
	if err != nil {
		writeError(w, err.status, err.code, err.msg)
		return
	}
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	_, _ = w.Write([]byte(xml.Header))
	_ = xml.NewEncoder(w).Encode(resp)
}

type apiError struct {
	status    int
	code, msg string
}

func statusOf(code string) int {
	switch code {
	case "RequestLimitExceeded", "InsufficientInstanceCapacity", "Unavailable":
		return http.StatusServiceUnavailable
	case "UnauthorizedOperation", "AuthFailure":
		return http.StatusForbidden
	}
	return http.StatusBadRequest
}

type errorResponse struct {
	XMLName   xml.Name `xml:"Response"`
	Code      string   `xml:"Errors>Error>Code"`
	Message   string   `xml:"Errors>Error>Message"`
	RequestID string   `xml:"RequestID"`
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(xml.Header))
	_ = xml.NewEncoder(w).Encode(errorResponse{Code: code, Message: msg, RequestID: "req-fake"})
}

// indexed collects a flat list: Prefix.1, Prefix.2, ...
func indexed(form url.Values, prefix string) []string {
	var out []string
	for i := 1; ; i++ {
		v, ok := form[prefix+"."+strconv.Itoa(i)]
		if !ok {
			return out
		}
		out = append(out, v[0])
	}
}

func (s *Server) runInstances(form url.Values) (any, *apiError) {
	if form.Get("MinCount") != "1" || form.Get("MaxCount") != "1" {
		return nil, &apiError{400, "InvalidParameterValue", "this fake launches one instance at a time"}
	}
	if form.Get("ImageId") == "" && form.Get("LaunchTemplate.LaunchTemplateId") == "" && form.Get("LaunchTemplate.LaunchTemplateName") == "" {
		return nil, &apiError{400, "MissingParameter", "The request must contain the parameter ImageId"}
	}
	if token := form.Get("ClientToken"); token != "" {
		if id, ok := s.tokens[token]; ok {
			return reservation("RunInstancesResponse", s.instances[id]), nil
		}
	}
	s.seq++
	in := &instance{
		ID: fmt.Sprintf("i-%017x", 0xfa4e0000+s.seq), Type: form.Get("InstanceType"), Zone: form.Get("Placement.AvailabilityZone"),
		State: "pending", Image: form.Get("ImageId"), Subnet: form.Get("SubnetId"), Profile: form.Get("IamInstanceProfile.Name"),
		SecurityGroups: indexed(form, "SecurityGroupId"), Tags: map[string]string{}, Launched: time.Now().UTC().Truncate(time.Second),
		IP: fmt.Sprintf("10.0.%d.%d", s.seq/250, s.seq%250+4), Token: form.Get("ClientToken"), hidden: s.HiddenDescribes, passing: s.Transitions,
		Console: s.Console,
	}
	if in.Zone == "" {
		in.Zone = "us-east-1a"
	}
	if data, err := base64.StdEncoding.DecodeString(form.Get("UserData")); err == nil {
		in.UserData = string(data)
	}
	if form.Get("InstanceMarketOptions.MarketType") == "spot" {
		in.Lifecycle = "spot"
	}
	for i := 1; form.Get(fmt.Sprintf("TagSpecification.%d.ResourceType", i)) != ""; i++ {
		for j := 1; ; j++ {
			k := form.Get(fmt.Sprintf("TagSpecification.%d.Tag.%d.Key", i, j))
			if k == "" {
				break
			}
			in.Tags[k] = form.Get(fmt.Sprintf("TagSpecification.%d.Tag.%d.Value", i, j))
		}
	}
	s.instances[in.ID] = in
	s.order = append(s.order, in.ID)
	if in.Token != "" {
		s.tokens[in.Token] = in.ID
	}
	return reservation("RunInstancesResponse", in), nil
}

func (s *Server) describeInstances(form url.Values) (any, *apiError) {
	ids := indexed(form, "InstanceId")
	for _, id := range ids {
		if in, ok := s.instances[id]; !ok || in.hidden > 0 {
			if in != nil {
				in.hidden--
			}
			return nil, &apiError{400, "InvalidInstanceID.NotFound", fmt.Sprintf("The instance ID '%s' does not exist", id)}
		}
	}
	filters := map[string][]string{}
	for i := 1; form.Get(fmt.Sprintf("Filter.%d.Name", i)) != ""; i++ {
		filters[form.Get(fmt.Sprintf("Filter.%d.Name", i))] = indexed(form, fmt.Sprintf("Filter.%d.Value", i))
	}
	var matched []*instance
	for _, id := range s.order {
		in := s.instances[id]
		if len(ids) == 0 && in.hidden > 0 {
			in.hidden--
			continue
		}
		if (len(ids) == 0 || contains(ids, id)) && matchesFilters(filters, in.Tags, map[string]string{"instance-state-name": in.State}) {
			matched = append(matched, in)
		}
	}
	for _, in := range matched {
		in.advance()
	}
	start, _ := strconv.Atoi(form.Get("NextToken"))
	size := s.PageSize
	if n, err := strconv.Atoi(form.Get("MaxResults")); err == nil && n > 0 {
		size = n
	}
	end := min(start+size, len(matched))
	out := describeResponse{RequestID: "req-fake"}
	for _, in := range matched[min(start, end):end] {
		out.Reservations = append(out.Reservations, reservationItem{ID: "r-" + in.ID[2:], Owner: "123456789012", Instances: []instanceXML{in.xml()}})
	}
	if end < len(matched) {
		out.NextToken = strconv.Itoa(end)
	}
	return out, nil
}

// advance moves a passing state on once it has been seen long enough.
func (in *instance) advance() {
	next := map[string]string{"pending": "running", "stopping": "stopped", "shutting-down": "terminated"}[in.State]
	if next == "" {
		return
	}
	if in.passing > 0 {
		in.passing--
		return
	}
	in.State = next
}

func (s *Server) changeState(form url.Values, response, passing string) (any, *apiError) {
	out := stateChangeResponse{XMLName: xml.Name{Local: response}, RequestID: "req-fake"}
	for _, id := range indexed(form, "InstanceId") {
		in, ok := s.instances[id]
		if !ok {
			return nil, &apiError{400, "InvalidInstanceID.NotFound", fmt.Sprintf("The instance ID '%s' does not exist", id)}
		}
		prev := in.State
		switch {
		case in.State == "terminated" || in.State == "shutting-down":
			if response != "TerminateInstancesResponse" {
				return nil, &apiError{400, "IncorrectInstanceState", fmt.Sprintf("The instance '%s' is %s.", id, in.State)}
			}
		case response == "StartInstancesResponse" && in.State != "stopped":
			if in.State != "running" && in.State != "pending" {
				return nil, &apiError{400, "IncorrectInstanceState", fmt.Sprintf("The instance '%s' is not in a state from which it can be started.", id)}
			}
		default:
			in.State, in.passing = passing, s.Transitions
		}
		out.Items = append(out.Items, stateChange{ID: id, Current: state(in.State), Previous: state(prev)})
	}
	return out, nil
}

func (s *Server) consoleOutput(form url.Values) (any, *apiError) {
	in, ok := s.instances[form.Get("InstanceId")]
	if !ok {
		return nil, &apiError{400, "InvalidInstanceID.NotFound", "The instance ID does not exist"}
	}
	return consoleResponse{RequestID: "req-fake", InstanceID: in.ID, Timestamp: time.Now().UTC().Format(time.RFC3339),
		Output: base64.StdEncoding.EncodeToString([]byte(in.Console))}, nil
}

// matchesFilters applies EC2 filters to a resource: tag:K to its tags
// (absent: no match), the names in fields to those values; others are
// not filtered on.
func matchesFilters(filters map[string][]string, tags, fields map[string]string) bool {
	for name, values := range filters {
		have, ok := fields[name]
		if key, isTag := strings.CutPrefix(name, "tag:"); isTag {
			if have, ok = tags[key]; !ok {
				return false
			}
		}
		if ok && !contains(values, have) {
			return false
		}
	}
	return true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Wire types.

type stateXML struct {
	Code int    `xml:"code"`
	Name string `xml:"name"`
}

var stateCodes = map[string]int{"pending": 0, "running": 16, "shutting-down": 32, "terminated": 48, "stopping": 64, "stopped": 80}

func state(name string) stateXML { return stateXML{Code: stateCodes[name], Name: name} }

type tagXML struct {
	Key   string `xml:"key"`
	Value string `xml:"value"`
}

type instanceXML struct {
	ID         string   `xml:"instanceId"`
	ImageID    string   `xml:"imageId"`
	State      stateXML `xml:"instanceState"`
	Type       string   `xml:"instanceType"`
	Zone       string   `xml:"placement>availabilityZone"`
	LaunchTime string   `xml:"launchTime"`
	PrivateIP  string   `xml:"privateIpAddress,omitempty"`
	SubnetID   string   `xml:"subnetId,omitempty"`
	Lifecycle  string   `xml:"instanceLifecycle,omitempty"`
	ClientTok  string   `xml:"clientToken,omitempty"`
	Tags       []tagXML `xml:"tagSet>item"`
}

func (in *instance) xml() instanceXML {
	x := instanceXML{ID: in.ID, ImageID: in.Image, State: state(in.State), Type: in.Type, Zone: in.Zone, LaunchTime: in.Launched.Format(time.RFC3339),
		SubnetID: in.Subnet, Lifecycle: in.Lifecycle, ClientTok: in.Token}
	if in.State != "terminated" && in.State != "stopped" {
		x.PrivateIP = in.IP
	}
	x.Tags = tagsXML(in.Tags)
	return x
}

// tagsXML is a tag set, sorted by key.
func tagsXML(tags map[string]string) []tagXML {
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]tagXML, 0, len(keys))
	for _, k := range keys {
		out = append(out, tagXML{k, tags[k]})
	}
	return out
}

type reservationItem struct {
	ID        string        `xml:"reservationId"`
	Owner     string        `xml:"ownerId"`
	Instances []instanceXML `xml:"instancesSet>item"`
}

type runResponse struct {
	XMLName   xml.Name
	RequestID string        `xml:"requestId"`
	ID        string        `xml:"reservationId"`
	Owner     string        `xml:"ownerId"`
	Instances []instanceXML `xml:"instancesSet>item"`
}

func reservation(name string, in *instance) runResponse {
	return runResponse{XMLName: xml.Name{Local: name}, RequestID: "req-fake", ID: "r-" + in.ID[2:], Owner: "123456789012", Instances: []instanceXML{in.xml()}}
}

type describeResponse struct {
	XMLName      xml.Name          `xml:"DescribeInstancesResponse"`
	RequestID    string            `xml:"requestId"`
	Reservations []reservationItem `xml:"reservationSet>item"`
	NextToken    string            `xml:"nextToken,omitempty"`
}

type stateChange struct {
	ID       string   `xml:"instanceId"`
	Current  stateXML `xml:"currentState"`
	Previous stateXML `xml:"previousState"`
}

type stateChangeResponse struct {
	XMLName   xml.Name
	RequestID string        `xml:"requestId"`
	Items     []stateChange `xml:"instancesSet>item"`
}

type consoleResponse struct {
	XMLName    xml.Name `xml:"GetConsoleOutputResponse"`
	RequestID  string   `xml:"requestId"`
	InstanceID string   `xml:"instanceId"`
	Timestamp  string   `xml:"timestamp"`
	Output     string   `xml:"output"`
}
