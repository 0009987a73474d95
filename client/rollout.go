package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/gantry-dev/gantry/api"
)

func servicePath(name, rest string) string { return "/v1/services/" + url.PathEscape(name) + rest }

// Rollout reads a service's deployment and revisions.
func (c *Client) Rollout(ctx context.Context, service string) (*api.Rollout, error) {
	var out api.Rollout
	return &out, c.getJSON(ctx, servicePath(service, "/rollout"), &out)
}

// RolloutAction asks for undo, restart, pause, resume: the service as
// changed.
func (c *Client) RolloutAction(ctx context.Context, service, action string, req any) (*api.Service, error) {
	if req == nil {
		req = struct{}{}
	}
	var out api.Service
	return &out, c.sendJSON(ctx, http.MethodPost, servicePath(service, "/rollout/"+action), req, &out)
}

// Promote lets a deployment waiting on its canaries go on.
func (c *Client) Promote(ctx context.Context, service string) (*api.Rollout, error) {
	var out api.Rollout
	return &out, c.sendJSON(ctx, http.MethodPost, servicePath(service, "/rollout/promote"), struct{}{}, &out)
}

// Scale sets a service's replica count.
func (c *Client) Scale(ctx context.Context, service string, replicas int) (*api.Service, error) {
	var out api.Service
	return &out, c.sendJSON(ctx, http.MethodPut, servicePath(service, "/scale"), api.ScaleRequest{Replicas: replicas}, &out)
}
