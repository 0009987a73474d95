// Package gcefake is an in-process fake of the Compute Engine REST API
// (compute/v1), for the calls Gantry's gcp provider makes: instances
// insert, get, list (label filters, pages), delete, stop, start,
// getSerialPortOutput, and zone operations get; the firewall calls of
// firewalls.go and the route calls of routes.go. Bodies are the API's JSON
// (protojson of the computepb messages the real client parses); the real
// cloud.google.com/go/compute client runs against it unchanged. Inserts
// complete through operations, states move on over time, and errors can be
// injected (an insert operation that fails with
// ZONE_RESOURCE_POOL_EXHAUSTED, an HTTP 403 or 429).
package gcefake

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Server is the fake; serve it with httptest.NewServer.
type Server struct {
	// PageSize bounds list pages when maxResults is absent.
	PageSize int
	// Console is every new instance's serial port output.
	Console string

	mu         sync.Mutex
	instances  map[string]*computepb.Instance // zone/name
	order      []string
	ops        map[string]*computepb.Operation
	requestIDs map[string]string // requestId → op name
	failInsert []string          // operation error codes for the next inserts
	failHTTP   map[string][]int  // method → HTTP statuses
	deleting   map[string]bool
	seq        int
	mux        *http.ServeMux
	// firewalls by name; subnetworks' networks by region/name.
	firewalls   map[string]*computepb.Firewall
	subnetworks map[string]string
	// routes by name (routes.go); failRoutes are statuses for the next
	// route inserts.
	routes     map[string]*computepb.Route
	failRoutes []int
}

// New returns an empty fake.
func New() *Server {
	s := &Server{PageSize: 5, instances: map[string]*computepb.Instance{}, ops: map[string]*computepb.Operation{},
		requestIDs: map[string]string{}, failHTTP: map[string][]int{}, deleting: map[string]bool{},
		firewalls: map[string]*computepb.Firewall{}, subnetworks: map[string]string{}, routes: map[string]*computepb.Route{}}
	m := http.NewServeMux()
	base := "/compute/v1/projects/{project}/zones/{zone}"
	m.HandleFunc("POST "+base+"/instances", s.insert)
	m.HandleFunc("GET "+base+"/instances", s.list)
	m.HandleFunc("GET "+base+"/instances/{name}", s.get)
	m.HandleFunc("DELETE "+base+"/instances/{name}", s.transition("delete", "STOPPING"))
	m.HandleFunc("POST "+base+"/instances/{name}/stop", s.transition("stop", "STOPPING"))
	m.HandleFunc("POST "+base+"/instances/{name}/start", s.transition("start", "STAGING"))
	m.HandleFunc("GET "+base+"/instances/{name}/serialPort", s.serialPort)
	m.HandleFunc("GET "+base+"/operations/{op}", s.operation)
	s.routeFirewalls(m)
	s.routeRoutes(m)
	s.mux = m
	return s
}

// FailInsert makes the next inserts' operations fail with these error
// codes (ZONE_RESOURCE_POOL_EXHAUSTED, QUOTA_EXCEEDED...).
func (s *Server) FailInsert(codes ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failInsert = append(s.failInsert, codes...)
}

// FailHTTP makes the next calls with this HTTP method answer these
// statuses (403, 429...).
func (s *Server) FailHTTP(method string, statuses ...int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failHTTP[method] = append(s.failHTTP[method], statuses...)
}

// Instance returns a copy of an instance, by zone/name.
func (s *Server) Instance(key string) (*computepb.Instance, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.instances[key]
	if !ok {
		return nil, false
	}
	return proto.Clone(in).(*computepb.Instance), true
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	if codes := s.failHTTP[r.Method]; len(codes) > 0 {
		s.failHTTP[r.Method] = codes[1:]
		s.mu.Unlock()
		writeError(w, codes[0], "injected by gcefake", map[int]string{403: "forbidden", 429: "rateLimitExceeded"}[codes[0]])
		return
	}
	s.mu.Unlock()
	s.mux.ServeHTTP(w, r)
}

func writeError(w http.ResponseWriter, status int, msg, reason string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"error":{"code":%d,"message":%q,"errors":[{"message":%q,"domain":"global","reason":%q}]}}`, status, msg, msg, reason)
}

func writeProto(w http.ResponseWriter, m proto.Message) {
	data, err := protojson.Marshal(m)
	if err != nil {
		writeError(w, 500, err.Error(), "backendError")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(data)
}

func key(r *http.Request) string { return r.PathValue("zone") + "/" + r.PathValue("name") }

func notFound(w http.ResponseWriter, r *http.Request) {
	writeError(w, http.StatusNotFound, fmt.Sprintf("The resource 'projects/%s/zones/%s/instances/%s' was not found", r.PathValue("project"), r.PathValue("zone"), r.PathValue("name")), "notFound")
}

var (
	nameRe       = regexp.MustCompile(`^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$`)
	labelKeyRe   = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,62}$`)
	labelValueRe = regexp.MustCompile(`^[a-z0-9_-]{0,63}$`)
)

func (s *Server) insert(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	in := &computepb.Instance{}
	if err := protojson.Unmarshal(body, in); err != nil {
		writeError(w, 400, "Invalid JSON payload received. "+err.Error(), "invalid")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if id := r.URL.Query().Get("requestId"); id != "" {
		if op, ok := s.requestIDs[id]; ok {
			writeProto(w, s.ops[op])
			return
		}
	}
	zone := r.PathValue("zone")
	switch {
	case !nameRe.MatchString(in.GetName()):
		writeError(w, 400, fmt.Sprintf("Invalid value for field 'resource.name': '%s'.", in.GetName()), "invalid")
		return
	case !strings.HasSuffix(in.GetMachineType(), "/machineTypes/"+lastSegment(in.GetMachineType())) || in.GetMachineType() == "":
		writeError(w, 400, "Invalid value for field 'resource.machineType'", "invalid")
		return
	}
	for k, v := range in.GetLabels() {
		if !labelKeyRe.MatchString(k) || !labelValueRe.MatchString(v) {
			writeError(w, 400, fmt.Sprintf("Invalid value for field 'resource.labels': '%s'.", k), "invalid")
			return
		}
	}
	k := zone + "/" + in.GetName()
	op := s.newOp("insert", zone, in.GetName())
	if id := r.URL.Query().Get("requestId"); id != "" {
		s.requestIDs[id] = op.GetName()
	}
	if len(s.failInsert) > 0 {
		code := s.failInsert[0]
		s.failInsert = s.failInsert[1:]
		op.Status = computepb.Operation_DONE.Enum()
		op.HttpErrorStatusCode, op.HttpErrorMessage = proto.Int32(503), proto.String("SERVICE UNAVAILABLE")
		op.Error = &computepb.Error{Errors: []*computepb.Errors{{Code: proto.String(code), Message: proto.String("The zone '" + zone + "' does not have enough resources available to fulfill the request.")}}}
		writeProto(w, op)
		return
	}
	if _, exists := s.instances[k]; exists {
		writeError(w, 409, fmt.Sprintf("The resource 'projects/%s/zones/%s/instances/%s' already exists", r.PathValue("project"), zone, in.GetName()), "alreadyExists")
		return
	}
	s.seq++
	in.Id = proto.Uint64(uint64(4000000000000000000 + s.seq))
	in.Zone = proto.String("https://www.googleapis.com/compute/v1/projects/" + r.PathValue("project") + "/zones/" + zone)
	in.Status = proto.String("PROVISIONING")
	in.CreationTimestamp = proto.String(time.Now().Format("2006-01-02T15:04:05.000-07:00"))
	if len(in.NetworkInterfaces) == 0 {
		in.NetworkInterfaces = []*computepb.NetworkInterface{{}}
	}
	in.NetworkInterfaces[0].NetworkIP = proto.String(fmt.Sprintf("10.128.%d.%d", s.seq/250, s.seq%250+2))
	s.instances[k] = in
	s.order = append(s.order, k)
	writeProto(w, op)
}

func lastSegment(s string) string { return s[strings.LastIndex(s, "/")+1:] }

func (s *Server) newOp(kind, zone, target string) *computepb.Operation {
	s.seq++
	op := &computepb.Operation{Name: proto.String(fmt.Sprintf("operation-%d-%s", s.seq, kind)), OperationType: proto.String(kind),
		Zone: proto.String(zone), TargetLink: proto.String(target), Status: computepb.Operation_RUNNING.Enum()}
	s.ops[op.GetName()] = op
	return op
}

func (s *Server) operation(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	op, ok := s.ops[r.PathValue("op")]
	if !ok {
		writeError(w, 404, "operation not found", "notFound")
		return
	}
	op.Status = computepb.Operation_DONE.Enum()
	writeProto(w, op)
}

// advance moves passing states on, one step per read.
func advance(in *computepb.Instance) {
	next := map[string]string{"PROVISIONING": "STAGING", "STAGING": "RUNNING", "STOPPING": "TERMINATED"}[in.GetStatus()]
	if next != "" {
		in.Status = proto.String(next)
	}
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.instances[key(r)]
	if !ok {
		notFound(w, r)
		return
	}
	s.settleDeleted(key(r), in)
	if _, ok := s.instances[key(r)]; !ok {
		notFound(w, r)
		return
	}
	writeProto(w, in)
	advance(in)
}

// settleDeleted removes an instance whose delete has finished: deleted
// instances are simply gone in Compute Engine.
func (s *Server) settleDeleted(k string, in *computepb.Instance) {
	if s.deleting[k] && in.GetStatus() == "TERMINATED" {
		delete(s.instances, k)
	}
}

func (s *Server) transition(kind, status string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		in, ok := s.instances[key(r)]
		if !ok {
			notFound(w, r)
			return
		}
		switch kind {
		case "start":
			if in.GetStatus() != "TERMINATED" && in.GetStatus() != "STOPPED" {
				writeProto(w, s.newOp(kind, r.PathValue("zone"), in.GetName()))
				return
			}
		case "delete":
			s.deleting[key(r)] = true
		}
		in.Status = proto.String(status)
		writeProto(w, s.newOp(kind, r.PathValue("zone"), in.GetName()))
	}
}

var filterTerm = regexp.MustCompile(`labels\.([a-z0-9_-]+)\s*=\s*"([^"]*)"`)

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := r.URL.Query()
	want := map[string]string{}
	for _, m := range filterTerm.FindAllStringSubmatch(q.Get("filter"), -1) {
		want[m[1]] = m[2]
	}
	if f := q.Get("filter"); f != "" && len(want) == 0 {
		writeError(w, 400, "Invalid list filter expression '"+f+"'.", "invalid")
		return
	}
	zone := r.PathValue("zone") + "/"
	var matched []*computepb.Instance
	for _, k := range s.order {
		in, ok := s.instances[k]
		if !ok || !strings.HasPrefix(k, zone) {
			continue
		}
		s.settleDeleted(k, in)
		if _, ok := s.instances[k]; !ok {
			continue
		}
		if labelsMatch(in.GetLabels(), want) {
			matched = append(matched, in)
		}
	}
	start, _ := strconv.Atoi(q.Get("pageToken"))
	size := s.PageSize
	if n, err := strconv.Atoi(q.Get("maxResults")); err == nil && n > 0 {
		size = n
	}
	end := min(start+size, len(matched))
	out := &computepb.InstanceList{Items: matched[min(start, end):end]}
	if end < len(matched) {
		out.NextPageToken = proto.String(strconv.Itoa(end))
	}
	writeProto(w, out)
	for _, in := range out.Items {
		advance(in)
	}
}

func labelsMatch(have, want map[string]string) bool {
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if have[k] != want[k] {
			return false
		}
	}
	return true
}

func (s *Server) serialPort(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.instances[key(r)]; !ok {
		notFound(w, r)
		return
	}
	writeProto(w, &computepb.SerialPortOutput{Contents: proto.String(s.Console), Start: proto.Int64(0), Next: proto.Int64(int64(len(s.Console)))})
}
