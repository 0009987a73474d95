// Package client is the Go client of Gantry's HTTP API, used by the CLI and
// by agents.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/api"
)

// Client talks to a server with one bearer token. Given several servers
// (that share a store), it stays with the one that answers and moves to
// the next when it stops answering.
type Client struct {
	servers *servers
	token   string
	http    *http.Client
	// attempt bounds the call to each server (0: only ctx and the HTTP
	// client's timeout do): past it, the next server is tried.
	attempt time.Duration
}

// New returns a client of the servers in baseURL (one URL, or several
// separated by commas). token may be empty (join only).
func New(baseURL, token string, httpClient *http.Client) *Client {
	if httpClient == nil {
		httpClient = http.DefaultClient
	}
	return &Client{servers: newServers(SplitURLs(baseURL)), token: token, http: httpClient}
}

// BaseURL is the server the client tries first (the one that answered
// last).
func (c *Client) BaseURL() string {
	if list := c.servers.list(); len(list) > 0 {
		return list[0]
	}
	return ""
}

// SplitURLs splits a comma-separated list of server URLs.
func SplitURLs(list string) []string {
	var out []string
	for _, u := range strings.Split(list, ",") {
		if u = strings.TrimRight(strings.TrimSpace(u), "/"); u != "" {
			out = append(out, u)
		}
	}
	return out
}

// Servers are the URLs the client uses, the current one first.
func (c *Client) Servers() []string { return c.servers.list() }

// SetServers replaces the URLs (an agent learns them from the server),
// keeping the current one first when it is still among them.
func (c *Client) SetServers(urls []string) { c.servers.set(urls) }

// WithToken returns a copy using another token.
func (c *Client) WithToken(token string) *Client {
	cp := *c
	cp.token = token
	return &cp
}

// WithAttemptTimeout returns a copy that gives each server at most d to
// answer before it tries the next one: a server that hangs (stopped,
// partitioned without a reset) does not hold the whole call.
func (c *Client) WithAttemptTimeout(d time.Duration) *Client {
	cp := *c
	cp.attempt = d
	return &cp
}

// APIError is an error the server answered with.
type APIError struct {
	Status int
	api.ErrorDetail
}

func (e *APIError) Error() string {
	if e.Field != "" && !strings.Contains(e.Message, e.Field) {
		return fmt.Sprintf("%s: %s", e.Field, e.Message)
	}
	return e.Message
}

// IsStatus reports whether err is an APIError with that HTTP status.
func IsStatus(err error, status int) bool {
	var e *APIError
	return errors.As(err, &e) && e.Status == status
}

func (c *Client) do(ctx context.Context, method, path string, contentType string, body io.Reader, out any) error {
	var payload []byte
	if body != nil {
		var err error
		if payload, err = io.ReadAll(body); err != nil {
			return fmt.Errorf("%s %s: read request body: %w", method, path, err)
		}
	}
	resp, err := c.send(ctx, method, path, contentType, payload)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("%s %s: read response: %w", method, path, err)
	}
	if resp.StatusCode >= 400 {
		var eb api.ErrorBody
		if json.Unmarshal(data, &eb) != nil || eb.Error.Message == "" {
			eb.Error = api.ErrorDetail{Code: http.StatusText(resp.StatusCode), Message: fmt.Sprintf("%s %s: HTTP %d", method, path, resp.StatusCode)}
		}
		return &APIError{Status: resp.StatusCode, ErrorDetail: eb.Error}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: decode response: %w", method, path, err)
	}
	return nil
}

// send tries the current server, then each other one in turn while they
// fail to answer or answer that they cannot serve (502, 503, 504).
func (c *Client) send(ctx context.Context, method, path, contentType string, payload []byte) (*http.Response, error) {
	urls := c.servers.list()
	if len(urls) == 0 {
		return nil, fmt.Errorf("%s %s: no gantry server URL", method, path)
	}
	var lastErr error
	var tried []string // what the servers before the last one said
	for _, base := range urls {
		resp, err := c.sendTo(ctx, base, method, path, contentType, payload)
		if err == nil && !unavailable(resp.StatusCode) {
			c.servers.prefer(base)
			return resp, nil
		}
		if err == nil {
			if len(urls) == 1 {
				return resp, nil
			}
			err = unavailableError(resp)
		}
		if lastErr != nil {
			tried = append(tried, lastErr.Error())
		}
		lastErr = fmt.Errorf("gantry server at %s: %w", base, err)
		if ctx.Err() != nil {
			break
		}
	}
	// Every server's reason is told; the last one's error is wrapped.
	return nil, fmt.Errorf("%s %s: %s%w", method, path, strings.Join(append(tried, ""), "; "), lastErr)
}

// unavailableError says why a server could not serve: the message of its
// error body, not only its status.
func unavailableError(resp *http.Response) error {
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var eb api.ErrorBody
	if json.Unmarshal(data, &eb) == nil && eb.Error.Message != "" {
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode, eb.Error.Message)
	}
	return fmt.Errorf("HTTP %d", resp.StatusCode)
}

func unavailable(status int) bool {
	return status == http.StatusBadGateway || status == http.StatusServiceUnavailable || status == http.StatusGatewayTimeout
}

func (c *Client) sendTo(ctx context.Context, base, method, path, contentType string, payload []byte) (*http.Response, error) {
	var body io.Reader
	if payload != nil {
		body = bytes.NewReader(payload)
	}
	cancel := context.CancelFunc(func() {})
	if c.attempt > 0 {
		ctx, cancel = context.WithTimeout(ctx, c.attempt)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, body)
	if err != nil {
		cancel()
		return nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		cancel()
		var urlErr *url.Error
		if errors.As(err, &urlErr) {
			err = urlErr.Err
		}
		return nil, err
	}
	resp.Body = cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// cancelOnClose ends an attempt's context once its body is read.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

func (c *Client) getJSON(ctx context.Context, path string, out any) error {
	return c.do(ctx, http.MethodGet, path, "", nil, out)
}

func (c *Client) sendJSON(ctx context.Context, method, path string, in, out any) error {
	data, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("encode request: %w", err)
	}
	return c.do(ctx, method, path, "application/json", bytes.NewReader(data), out)
}

// Apply creates or updates the resources of a YAML or JSON file.
func (c *Client) Apply(ctx context.Context, file []byte) (*api.ApplyResult, error) {
	var out api.ApplyResult
	err := c.do(ctx, http.MethodPost, "/v1/apply", "application/yaml", bytes.NewReader(file), &out)
	return &out, err
}

// DiffApply says what applying a file would change, writing nothing.
func (c *Client) DiffApply(ctx context.Context, file []byte) (*api.ApplyResult, error) {
	var out api.ApplyResult
	err := c.do(ctx, http.MethodPost, "/v1/apply?dryRun=true", "application/yaml", bytes.NewReader(file), &out)
	return &out, err
}

// Plan asks the server for the dry run of a spec file: what its control
// loop would do with the file's resources in place of the live ones.
func (c *Client) Plan(ctx context.Context, file []byte) (*api.CapacityPlan, error) {
	var out api.CapacityPlan
	err := c.do(ctx, http.MethodPost, "/v1/plan", "application/yaml", bytes.NewReader(file), &out)
	return &out, err
}

// ListClusters lists clusters with their status.
func (c *Client) ListClusters(ctx context.Context) ([]api.Cluster, error) {
	var out struct{ Items []api.Cluster }
	return out.Items, c.getJSON(ctx, "/v1/clusters", &out)
}

// GetCluster returns one cluster.
func (c *Client) GetCluster(ctx context.Context, name string) (*api.Cluster, error) {
	var out api.Cluster
	return &out, c.getJSON(ctx, "/v1/clusters/"+url.PathEscape(name), &out)
}

// DeleteCluster deletes a cluster with no services; its machines are
// terminated.
func (c *Client) DeleteCluster(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "/v1/clusters/"+url.PathEscape(name), "", nil, nil)
}

// ListServices lists services with their status.
func (c *Client) ListServices(ctx context.Context) ([]api.Service, error) {
	var out struct{ Items []api.Service }
	return out.Items, c.getJSON(ctx, "/v1/services", &out)
}

// GetService returns one service.
func (c *Client) GetService(ctx context.Context, name string) (*api.Service, error) {
	var out api.Service
	return &out, c.getJSON(ctx, "/v1/services/"+url.PathEscape(name), &out)
}

// DeleteService deletes a service; its replicas stop.
func (c *Client) DeleteService(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "/v1/services/"+url.PathEscape(name), "", nil, nil)
}

// Health reads the server's /healthz: its build, whether it leads, and
// whether its store answers (an error when it does not).
func (c *Client) Health(ctx context.Context) (*api.ServerHealth, error) {
	var out api.ServerHealth
	return &out, c.getJSON(ctx, "/healthz", &out)
}

// DeleteReplica deletes one replica: its service makes its index again.
func (c *Client) DeleteReplica(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/v1/replicas/"+url.PathEscape(id), "", nil, nil)
}

// ListMachines lists machines, optionally of one cluster.
func (c *Client) ListMachines(ctx context.Context, cluster string) ([]api.Machine, error) {
	var out struct{ Items []api.Machine }
	return out.Items, c.getJSON(ctx, "/v1/machines?cluster="+url.QueryEscape(cluster), &out)
}

// ListEveryMachine lists a cluster's machines, terminated ones too ("":
// every cluster's).
func (c *Client) ListEveryMachine(ctx context.Context, cluster string) ([]api.Machine, error) {
	var out struct{ Items []api.Machine }
	return out.Items, c.getJSON(ctx, "/v1/machines?all=1&cluster="+url.QueryEscape(cluster), &out)
}

// GetMachine returns one machine.
func (c *Client) GetMachine(ctx context.Context, id string) (*api.Machine, error) {
	var out api.Machine
	return &out, c.getJSON(ctx, "/v1/machines/"+url.PathEscape(id), &out)
}

// Drain drains a machine and then terminates it.
func (c *Client) Drain(ctx context.Context, id string, req api.DrainRequest) (*api.Machine, error) {
	var out api.Machine
	return &out, c.sendJSON(ctx, http.MethodPost, "/v1/machines/"+url.PathEscape(id)+"/drain", req, &out)
}

// Cordon marks a machine unschedulable (or schedulable again).
func (c *Client) Cordon(ctx context.Context, id string, cordon bool) (*api.Machine, error) {
	action := "/uncordon"
	if cordon {
		action = "/cordon"
	}
	var out api.Machine
	return &out, c.sendJSON(ctx, http.MethodPost, "/v1/machines/"+url.PathEscape(id)+action, struct{}{}, &out)
}

// ListReplicas lists replicas, optionally of one service.
func (c *Client) ListReplicas(ctx context.Context, service string) ([]api.Replica, error) {
	var out struct{ Items []api.Replica }
	return out.Items, c.getJSON(ctx, "/v1/replicas?service="+url.QueryEscape(service), &out)
}

// GetReplica returns one replica.
func (c *Client) GetReplica(ctx context.Context, id string) (*api.Replica, error) {
	var out api.Replica
	return &out, c.getJSON(ctx, "/v1/replicas/"+url.PathEscape(id), &out)
}

// EventQuery filters events.
type EventQuery struct {
	Kind    string
	Name    string
	AfterID int64
	Limit   int
}

// ListEvents lists events, oldest first.
func (c *Client) ListEvents(ctx context.Context, q EventQuery) ([]api.Event, error) {
	v := url.Values{}
	if q.Kind != "" {
		v.Set("kind", q.Kind)
	}
	if q.Name != "" {
		v.Set("name", q.Name)
	}
	if q.AfterID > 0 {
		v.Set("after", fmt.Sprint(q.AfterID))
	}
	if q.Limit > 0 {
		v.Set("limit", fmt.Sprint(q.Limit))
	}
	var out struct{ Items []api.Event }
	return out.Items, c.getJSON(ctx, "/v1/events?"+v.Encode(), &out)
}

// CreateJoinToken mints a join token for a machine Gantry did not launch.
func (c *Client) CreateJoinToken(ctx context.Context, req api.JoinTokenRequest) (*api.JoinTokenResponse, error) {
	var out api.JoinTokenResponse
	return &out, c.sendJSON(ctx, http.MethodPost, "/v1/join-tokens", req, &out)
}

// Join exchanges a join token for a machine credential.
func (c *Client) Join(ctx context.Context, req api.JoinRequest) (*api.JoinResponse, error) {
	var out api.JoinResponse
	return &out, c.sendJSON(ctx, http.MethodPost, "/v1/join", req, &out)
}

// Heartbeat reports replica status and returns the machine's assignments.
func (c *Client) Heartbeat(ctx context.Context, machineID string, req api.HeartbeatRequest) (*api.HeartbeatResponse, error) {
	var out api.HeartbeatResponse
	return &out, c.sendJSON(ctx, http.MethodPost, "/v1/machines/"+url.PathEscape(machineID)+"/heartbeat", req, &out)
}

// Assignments returns a machine's assignments.
func (c *Client) Assignments(ctx context.Context, machineID string) ([]api.Assignment, error) {
	var out struct{ Items []api.Assignment }
	return out.Items, c.getJSON(ctx, "/v1/machines/"+url.PathEscape(machineID)+"/assignments", &out)
}

// Logs streams a replica's output (relayed by the server from its agent);
// the caller closes the reader. With follow it ends when ctx does.
func (c *Client) Logs(ctx context.Context, replicaID string, opts LogOptions) (io.ReadCloser, error) {
	path := fmt.Sprintf("/v1/replicas/%s/logs?follow=%t&tail=%d&previous=%t", url.PathEscape(replicaID), opts.Follow, opts.Tail, opts.Previous)
	// No client timeout: a followed log lasts as long as ctx.
	httpClient := *c.http
	httpClient.Timeout = 0
	streaming := *c
	streaming.http = &httpClient
	resp, err := streaming.send(ctx, http.MethodGet, path, "", nil)
	if err != nil {
		return nil, fmt.Errorf("logs of %s: %w", replicaID, err)
	}
	if resp.StatusCode >= 400 {
		defer resp.Body.Close()
		return nil, errorResponse(resp, "logs of "+replicaID)
	}
	return resp.Body, nil
}

// LogOptions select a replica's output: Tail lines from the end (-1:
// all), then what follows (Follow); or its previous instance's.
type LogOptions struct {
	Follow   bool
	Tail     int
	Previous bool
}

// LogRequests long-polls for the machine's pending log requests (agent).
func (c *Client) LogRequests(ctx context.Context, machineID string) ([]api.LogRequest, error) {
	var out struct {
		Items []api.LogRequest `json:"items"`
	}
	err := c.getJSON(ctx, "/v1/machines/"+url.PathEscape(machineID)+"/log-requests", &out)
	return out.Items, err
}

// SendLogChunk posts one chunk of a log stream (agent). eof ends the
// stream; errMsg reports why there is no stream. A 410 means the reader
// has left.
func (c *Client) SendLogChunk(ctx context.Context, machineID, streamID string, data []byte, eof bool, errMsg string) error {
	q := url.Values{}
	if eof {
		q.Set("eof", "1")
	}
	if errMsg != "" {
		q.Set("error", errMsg)
	}
	path := "/v1/machines/" + url.PathEscape(machineID) + "/log-streams/" + url.PathEscape(streamID)
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return c.do(ctx, http.MethodPost, path, "application/octet-stream", bytes.NewReader(data), nil)
}

// WithHTTPClient returns a copy using another HTTP client.
func (c *Client) WithHTTPClient(h *http.Client) *Client {
	cp := *c
	cp.http = h
	return &cp
}

// CreateToken creates an API token; the secret is in the answer only.
func (c *Client) CreateToken(ctx context.Context, req api.TokenRequest) (*api.TokenResponse, error) {
	var out api.TokenResponse
	return &out, c.sendJSON(ctx, http.MethodPost, "/v1/tokens", req, &out)
}

// ListTokens lists API tokens (without secrets).
func (c *Client) ListTokens(ctx context.Context) ([]api.Token, error) {
	var out struct{ Items []api.Token }
	return out.Items, c.getJSON(ctx, "/v1/tokens", &out)
}

// RevokeToken revokes a token at once, on every server.
func (c *Client) RevokeToken(ctx context.Context, id string) (*api.Token, error) {
	var out api.Token
	return &out, c.do(ctx, http.MethodDelete, "/v1/tokens/"+url.PathEscape(id), "", nil, &out)
}

// CreateSecret creates a Secret (replace: create or replace its values).
// The answer holds its keys and revision, never values.
func (c *Client) CreateSecret(ctx context.Context, name string, data map[string]string, replace bool) (*api.Secret, error) {
	var out api.Secret
	if replace {
		return &out, c.sendJSON(ctx, http.MethodPut, "/v1/secrets/"+url.PathEscape(name), api.SecretRequest{Data: data}, &out)
	}
	return &out, c.sendJSON(ctx, http.MethodPost, "/v1/secrets", api.SecretRequest{Name: name, Data: data}, &out)
}

// ListSecrets lists Secrets: keys and revisions.
func (c *Client) ListSecrets(ctx context.Context) ([]api.Secret, error) {
	var out struct{ Items []api.Secret }
	return out.Items, c.getJSON(ctx, "/v1/secrets", &out)
}

// DeleteSecret deletes a Secret nothing uses.
func (c *Client) DeleteSecret(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "/v1/secrets/"+url.PathEscape(name), "", nil, nil)
}

// GetSecret reads a Secret's keys and revision.
func (c *Client) GetSecret(ctx context.Context, name string) (*api.Secret, error) {
	var out api.Secret
	return &out, c.getJSON(ctx, "/v1/secrets/"+url.PathEscape(name), &out)
}

// Cost reads the cost view: the fleet's $/hour by cluster and group, and
// the plan from scratch with its lower bound.
func (c *Client) Cost(ctx context.Context) (*api.CostReport, error) {
	var out api.CostReport
	return &out, c.getJSON(ctx, "/v1/cost", &out)
}

// History reads the answering server's samples of the fleet (the
// dashboard's charts).
func (c *Client) History(ctx context.Context) (*api.History, error) {
	var out api.History
	return &out, c.getJSON(ctx, "/v1/history", &out)
}

// Usage reads what each machine's replicas use now, as they last
// reported (gantry top).
func (c *Client) Usage(ctx context.Context) (*api.UsageReport, error) {
	var out api.UsageReport
	return &out, c.getJSON(ctx, "/v1/usage", &out)
}
