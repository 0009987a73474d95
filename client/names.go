package client

import (
	"context"
	"net/url"

	"github.com/gantry-dev/gantry/api"
)

// ServiceEndpoints is every replica of a service with whether its name
// answers it, and why.
func (c *Client) ServiceEndpoints(ctx context.Context, service string) (*api.ServiceEndpoints, error) {
	var out api.ServiceEndpoints
	if err := c.getJSON(ctx, "/v1/services/"+url.PathEscape(service)+"/endpoints", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// MachineNames waits for the names of the machine's cluster to differ
// from version (agent; the server holds the call until they do, or its
// own wait ends: then the same version comes back).
func (c *Client) MachineNames(ctx context.Context, machineID, version string) (*api.ClusterNames, error) {
	var out api.ClusterNames
	q := url.Values{"version": {version}}
	if err := c.getJSON(ctx, "/v1/machines/"+url.PathEscape(machineID)+"/names?"+q.Encode(), &out); err != nil {
		return nil, err
	}
	return &out, nil
}
