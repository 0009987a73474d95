// Package openapi builds Gantry's OpenAPI 3 document from the api types,
// so the document cannot drift from the wire format. server/openapi.json is
// its output, checked by a test.
package openapi

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/planner"
	"github.com/gantry-dev/gantry/sim/report"
)

// Operation documents one route.
type Operation struct {
	Method, Path, Summary string
	Auth                  string // "admin", "machine" or "" (public)
	Request               any    // nil, a Go value, or "yaml" for a spec file
	Response              any
	Status                int
	Query                 []string
}

type list[T any] struct {
	Metadata *api.ListMeta `json:"metadata,omitempty"`
	Items    []T           `json:"items"`
}

// feedQuery are the query parameters of the lists of the kinds in the
// change feed (a watch: JSON lines of api.WatchEvent after a revision),
// after those given.
func feedQuery(params ...string) []string { return append(params, "watch", "resourceVersion") }

// pagedQuery adds the pages of the long lists.
func pagedQuery(params ...string) []string { return feedQuery(append(params, "limit", "continue")...) }

// Operations is the API, route by route.
func Operations() []Operation {
	return []Operation{
		{Method: "GET", Path: "/healthz", Summary: "Health of the server: 200, or 503 with the error while its store does not accept writes", Response: map[string]string{}},
		{Method: "GET", Path: "/v1/openapi.json", Summary: "This document", Response: map[string]any{}},
		{Method: "GET", Path: "/metrics", Summary: "Prometheus metrics (text exposition format)", Response: ""},
		{Method: "POST", Path: "/v1/apply", Summary: "Create or update the resources of a YAML or JSON spec file, all or none (?dryRun=true: say what would change, write nothing)", Auth: "admin", Request: "yaml", Response: api.ApplyResult{}},
		{Method: "POST", Path: "/v1/plan", Summary: "Dry run: the control loop's decision with a spec file's resources in place of the live ones (checked as apply checks them); nothing changes", Auth: "admin", Request: "yaml", Response: planner.Plan{}},
		{Method: "GET", Path: "/v1/clusters", Summary: "List clusters with group status, or watch their changes (watch=true)", Auth: "admin", Response: list[api.Cluster]{}, Query: feedQuery()},
		{Method: "GET", Path: "/v1/clusters/{name}", Summary: "Get a cluster", Auth: "admin", Response: api.Cluster{}},
		{Method: "PUT", Path: "/v1/clusters/{name}", Summary: "Replace a cluster (update rules apply)", Auth: "admin", Request: "yaml", Response: api.ApplyItem{}},
		{Method: "DELETE", Path: "/v1/clusters/{name}", Summary: "Delete a cluster that runs no service; its machines are terminated", Auth: "admin", Response: map[string]string{}},
		{Method: "GET", Path: "/v1/services", Summary: "List services with replica counts, or watch their changes (watch=true)", Auth: "admin", Response: list[api.Service]{}, Query: feedQuery()},
		{Method: "GET", Path: "/v1/services/{name}", Summary: "Get a service", Auth: "admin", Response: api.Service{}},
		{Method: "PUT", Path: "/v1/services/{name}", Summary: "Replace a service", Auth: "admin", Request: "yaml", Response: api.ApplyItem{}},
		{Method: "DELETE", Path: "/v1/services/{name}", Summary: "Delete a service; its replicas stop", Auth: "admin", Response: map[string]string{}},
		{Method: "PUT", Path: "/v1/services/{name}/scale", Summary: "Set a service's replica count (not a new revision: nothing restarts)", Auth: "admin", Request: api.ScaleRequest{}, Response: api.Service{}},
		{Method: "GET", Path: "/v1/failovergroups", Summary: "List failover groups with their phase, epoch and primary, or watch their changes (watch=true)", Auth: "admin", Response: list[api.FailoverGroup]{}, Query: feedQuery()},
		{Method: "GET", Path: "/v1/failovergroups/{name}", Summary: "Read a failover group: which side is primary, where it serves (status.endpoint), each member's role", Auth: "admin", Response: api.FailoverGroup{}},
		{Method: "DELETE", Path: "/v1/failovergroups/{name}", Summary: "Delete a failover group and both its services", Auth: "admin", Response: map[string]string{}},
		{Method: "POST", Path: "/v1/failovergroups/{name}/promote", Summary: "Promote the replica side: a planned switchover, or a fenced failover when the primary failed", Auth: "admin", Response: map[string]string{}, Status: 202},
		{Method: "POST", Path: "/v1/failovergroups/{name}/revert", Summary: "Switch back to the spec's primary side (a planned switchover)", Auth: "admin", Response: map[string]string{}, Status: 202},
		{Method: "GET", Path: "/v1/services/{name}/endpoints", Summary: "Every replica of a service with whether its name answers it, and why", Auth: "admin", Response: api.ServiceEndpoints{}},
		{Method: "GET", Path: "/v1/services/{name}/rollout", Summary: "A service's deployment and revisions (newest last)", Auth: "admin", Response: api.Rollout{}},
		{Method: "POST", Path: "/v1/services/{name}/rollout/undo", Summary: "Return a service to an earlier revision (default: the last good one before the current)", Auth: "admin", Request: api.RolloutUndo{}, Response: api.Service{}},
		{Method: "POST", Path: "/v1/services/{name}/rollout/restart", Summary: "Replace every replica through a new revision that runs the same thing", Auth: "admin", Response: api.Service{}},
		{Method: "POST", Path: "/v1/services/{name}/rollout/pause", Summary: "Pause the service's deployments where they are", Auth: "admin", Response: api.Service{}},
		{Method: "POST", Path: "/v1/services/{name}/rollout/resume", Summary: "Resume the service's deployments", Auth: "admin", Response: api.Service{}},
		{Method: "POST", Path: "/v1/services/{name}/rollout/promote", Summary: "Promote a deployment waiting on its canaries", Auth: "admin", Response: api.Rollout{}},
		{Method: "GET", Path: "/v1/machines", Summary: "List live machines (all=1 includes terminated) in pages (limit and continue, or limit and offset with metadata.remainingItemCount), or watch their changes (watch=true)", Auth: "admin", Response: list[api.Machine]{}, Query: pagedQuery("cluster", "all", "offset")},
		{Method: "GET", Path: "/v1/machines/{id}", Summary: "Get a machine", Auth: "admin", Response: api.Machine{}},
		{Method: "POST", Path: "/v1/machines/{id}/cordon", Summary: "Cordon a machine: it takes no new replicas; those it runs stay", Auth: "admin", Response: api.Machine{}},
		{Method: "POST", Path: "/v1/machines/{id}/uncordon", Summary: "Uncordon a machine: it takes new replicas again", Auth: "admin", Response: api.Machine{}},
		{Method: "POST", Path: "/v1/machines/{id}/drain", Summary: "Drain a machine: its replicas move (new copy running first), then it is terminated", Auth: "admin", Request: api.DrainRequest{}, Response: api.Machine{}},
		{Method: "GET", Path: "/v1/replicas", Summary: "List replicas in pages (limit and continue, or limit and offset with metadata.remainingItemCount), or watch their changes (watch=true)", Auth: "admin", Response: list[api.Replica]{}, Query: pagedQuery("service", "machine", "cluster", "offset")},
		{Method: "GET", Path: "/v1/replicas/{id}", Summary: "Get a replica", Auth: "admin", Response: api.Replica{}},
		{Method: "GET", Path: "/v1/replicas/{id}/exec", Summary: "Run a command in a replica (WebSocket: binary messages whose first byte is the channel: 0 stdin, 1 stdout, 2 stderr, 3 status JSON, 4 terminal size JSON, 5 stdin closed); admin tokens only; audited", Auth: "admin", Query: []string{"command", "stdin", "tty"}},
		{Method: "GET", Path: "/v1/replicas/{id}/portforward", Summary: "One connection to a replica's port (WebSocket of the connection's bytes); admin tokens only; audited", Auth: "admin", Query: []string{"port"}},
		{Method: "DELETE", Path: "/v1/replicas/{id}", Summary: "Delete one replica, as kubectl deletes a Pod: it leaves its service's name, its index is made again, and it stops once drained (not a failover member)", Auth: "admin", Response: api.Replica{}},
		{Method: "GET", Path: "/v1/events", Summary: "List events, oldest first", Auth: "admin", Response: list[api.Event]{}, Query: []string{"kind", "name", "after", "limit"}},
		{Method: "GET", Path: "/v1/usage", Summary: "What each machine's replicas use now, as their agents last measured it (kept in memory by the server each machine heartbeats to, gathered from the other --agent-servers unless local=true; never stored)", Auth: "admin", Response: api.UsageReport{}, Query: []string{"local"}},
		{Method: "GET", Path: "/v1/history", Summary: "The samples of the fleet this server took for the dashboard's charts, oldest first (cost and its LP bound, allocated and allocatable CPU and memory, pending replicas, heartbeat latency; kept in memory, bounded by --history-length)", Auth: "admin", Response: api.History{}},
		{Method: "GET", Path: "/v1/traces", Summary: "List the demand traces kept for simulations", Auth: "admin", Response: list[api.Trace]{}},
		{Method: "GET", Path: "/v1/traces/{name}", Summary: "A kept demand trace's CSV (text/csv)", Auth: "admin", Response: ""},
		{Method: "PUT", Path: "/v1/traces/{name}", Summary: "Keep a demand trace for simulations, checked against the stored services (bounded by --max-trace-bytes, --max-traces, --max-trace-span); replaces one of that name", Auth: "admin", Request: "csv", Response: api.Trace{}},
		{Method: "DELETE", Path: "/v1/traces/{name}", Summary: "Delete a kept demand trace", Auth: "admin", Response: map[string]string{}},
		{Method: "POST", Path: "/v1/simulations", Summary: "Run a kept trace through the control loop on the stored spec, once per policy (the server's decision settings changed by the policy's), on a simulated clock and provider: each policy's cost, bound, machine-hours, waits and disruptions, and their plot (SVG); nothing changes (a read-only token may run one). One runs at a time (429 while one runs), for at most --simulate-timeout", Auth: "admin", Request: api.SimulationRequest{}, Response: report.Simulation{}},
		{Method: "GET", Path: "/v1/cost", Summary: "What the live machines cost by cluster and group, beside a plan of the same services from scratch and its lower bound", Auth: "admin", Response: api.CostReport{}},
		{Method: "POST", Path: "/v1/join-tokens", Summary: "Mint a join token for a machine Gantry did not launch", Auth: "admin", Request: api.JoinTokenRequest{}, Response: api.JoinTokenResponse{}, Status: 201},
		{Method: "GET", Path: "/v1/secrets", Summary: "List Secrets: their keys and revisions, never their values", Auth: "admin", Response: list[api.Secret]{}},
		{Method: "POST", Path: "/v1/secrets", Summary: "Create a Secret (its values are sealed and never answered)", Auth: "admin", Request: api.SecretRequest{}, Response: api.Secret{}, Status: 201},
		{Method: "GET", Path: "/v1/secrets/{name}", Summary: "Read a Secret's keys and revision, never its values", Auth: "admin", Response: api.Secret{}},
		{Method: "PUT", Path: "/v1/secrets/{name}", Summary: "Create or replace a Secret's values; the replicas and machines that use it roll", Auth: "admin", Request: api.SecretRequest{}, Response: api.Secret{}},
		{Method: "DELETE", Path: "/v1/secrets/{name}", Summary: "Delete a Secret no service or cluster uses", Auth: "admin", Response: map[string]string{}},
		{Method: "POST", Path: "/v1/tokens", Summary: "Create an API token (admin, read-only, or join: one cluster's group, single-use unless maxUses); the secret is in this answer only", Auth: "admin", Request: api.TokenRequest{}, Response: api.TokenResponse{}, Status: 201},
		{Method: "GET", Path: "/v1/tokens", Summary: "List API tokens, never their secrets", Auth: "admin", Response: list[api.Token]{}},
		{Method: "DELETE", Path: "/v1/tokens/{id}", Summary: "Revoke a token, at once on every server", Auth: "admin", Response: api.Token{}},
		{Method: "POST", Path: "/v1/join", Summary: "Exchange a join token for a machine credential", Request: api.JoinRequest{}, Response: api.JoinResponse{}},
		{Method: "POST", Path: "/v1/machines/{id}/heartbeat", Summary: "Report replica status; returns the machine's assignments", Auth: "machine", Request: api.HeartbeatRequest{}, Response: api.HeartbeatResponse{}},
		{Method: "GET", Path: "/v1/machines/{id}/assignments", Summary: "The replicas assigned to a machine", Auth: "machine", Response: list[api.Assignment]{}},
		{Method: "GET", Path: "/v1/machines/{id}/assignments/wait", Summary: "Long poll: answered once the machine's assignments may have changed after revision since (0: at once), or after the server's wait", Auth: "machine", Response: api.AssignmentsWait{}, Query: []string{"since"}},
		{Method: "GET", Path: "/v1/replicas/{id}/logs", Summary: "Stream a replica's output (text), relayed from its machine's agent", Auth: "admin", Response: "", Query: []string{"follow", "tail"}},
		{Method: "GET", Path: "/v1/machines/{id}/log-requests", Summary: "Long poll: the log requests waiting for this machine's agent", Auth: "machine", Response: list[api.LogRequest]{}},
		{Method: "GET", Path: "/v1/machines/{id}/names", Summary: "Long poll: the DNS names of the machine's cluster, once their version differs from version (with delta=true: the difference from version, when the server still keeps it)", Auth: "machine", Response: api.ClusterNames{}, Query: []string{"version", "delta"}},
		{Method: "POST", Path: "/v1/machines/{id}/log-streams/{stream}", Summary: "One chunk of a log stream from the agent (410: the reader left)", Auth: "machine", Request: "bytes", Response: "", Status: 204, Query: []string{"eof", "error"}},
		{Method: "GET", Path: "/v1/machines/{id}/streams/{stream}", Summary: "The agent's side of an exec or port-forward it was asked for (WebSocket)", Auth: "machine"},
	}
}

// Document returns the OpenAPI document as indented JSON.
func Document() []byte {
	schemas := map[string]any{}
	paths := map[string]map[string]any{}
	for _, op := range Operations() {
		if paths[op.Path] == nil {
			paths[op.Path] = map[string]any{}
		}
		paths[op.Path][strings.ToLower(op.Method)] = operation(op, schemas)
	}
	doc := map[string]any{
		"openapi": "3.0.3",
		"info":    map[string]any{"title": "Gantry API", "version": "v1", "description": "Gantry's control plane API. Errors are {\"error\": {code, message, field}}."},
		"paths":   paths,
		"components": map[string]any{
			"schemas": schemas,
			"securitySchemes": map[string]any{
				"admin":   map[string]any{"type": "http", "scheme": "bearer", "description": "Admin token"},
				"machine": map[string]any{"type": "http", "scheme": "bearer", "description": "Machine credential from /v1/join; only for its own machine's routes"},
			},
		},
	}
	out, _ := json.MarshalIndent(doc, "", "  ")
	return append(out, '\n')
}

func operation(op Operation, schemas map[string]any) map[string]any {
	status := op.Status
	if status == 0 {
		status = 200
	}
	errorSchema := schemaOf(reflect.TypeOf(api.ErrorBody{}), schemas)
	ok := map[string]any{"description": "OK"}
	if op.Response == nil { // a WebSocket
		status, ok = http.StatusSwitchingProtocols, map[string]any{"description": "Switching Protocols: a WebSocket"}
	} else {
		ok["content"] = jsonContent(schemaOf(reflect.TypeOf(op.Response), schemas))
	}
	o := map[string]any{
		"summary": op.Summary,
		"responses": map[string]any{
			strconv.Itoa(status): ok,
			"default":            map[string]any{"description": "Error", "content": jsonContent(errorSchema)},
		},
	}
	if op.Auth != "" {
		o["security"] = []any{map[string]any{op.Auth: []string{}}}
	}
	var params []any
	for _, seg := range strings.Split(op.Path, "/") {
		if strings.HasPrefix(seg, "{") {
			params = append(params, map[string]any{"name": strings.Trim(seg, "{}"), "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
		}
	}
	for _, q := range op.Query {
		params = append(params, map[string]any{"name": q, "in": "query", "schema": map[string]any{"type": "string"}})
	}
	if params != nil {
		o["parameters"] = params
	}
	switch req := op.Request.(type) {
	case nil:
	case string:
		if req == "csv" {
			o["requestBody"] = map[string]any{"required": true, "description": "A demand trace: CSV of time, service, replicas and optionally cpu, memory, gpu (docs/simulate.md)",
				"content": map[string]any{"text/csv": map[string]any{"schema": map[string]any{"type": "string"}}}}
			break
		}
		if req == "bytes" {
			o["requestBody"] = map[string]any{"required": true, "content": map[string]any{"application/octet-stream": map[string]any{"schema": map[string]any{"type": "string", "format": "binary"}}}}
			break
		}
		o["requestBody"] = map[string]any{"required": true, "description": "One or more YAML or JSON documents (Cluster, Service)",
			"content": map[string]any{"application/yaml": map[string]any{"schema": map[string]any{"type": "string"}}}}
	default:
		o["requestBody"] = map[string]any{"required": true, "content": jsonContent(schemaOf(reflect.TypeOf(req), schemas))}
	}
	return o
}

func jsonContent(schema any) map[string]any {
	return map[string]any{"application/json": map[string]any{"schema": schema}}
}

// schemaOf returns a JSON schema for t, registering named structs as
// components.
func schemaOf(t reflect.Type, schemas map[string]any) map[string]any {
	if t.Kind() == reflect.Pointer {
		return schemaOf(t.Elem(), schemas)
	}
	if t == reflect.TypeOf(time.Time{}) {
		return map[string]any{"type": "string", "format": "date-time"}
	}
	switch t.Kind() {
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int64, reflect.Int32:
		return map[string]any{"type": "integer"}
	case reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Slice:
		return map[string]any{"type": "array", "items": schemaOf(t.Elem(), schemas)}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": schemaOf(t.Elem(), schemas)}
	case reflect.Interface:
		return map[string]any{}
	case reflect.Struct:
		name := t.Name()
		if i := strings.Index(name, "["); i >= 0 {
			return structSchema(t, schemas) // generic list wrapper: inline
		}
		ref := map[string]any{"$ref": "#/components/schemas/" + name}
		if _, done := schemas[name]; !done {
			schemas[name] = map[string]any{} // placeholder for recursion
			schemas[name] = structSchema(t, schemas)
		}
		return ref
	}
	return map[string]any{}
}

func structSchema(t reflect.Type, schemas map[string]any) map[string]any {
	props := map[string]any{}
	var required []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		props[name] = schemaOf(f.Type, schemas)
		if !strings.Contains(opts, "omitempty") && f.Type.Kind() != reflect.Pointer {
			required = append(required, name)
		}
	}
	s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if required != nil {
		s["required"] = required
	}
	return s
}
