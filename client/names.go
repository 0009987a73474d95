package client

import (
	"context"
	"net/url"
	"strconv"

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
	return c.machineNames(ctx, machineID, url.Values{"version": {version}})
}

// MachineNamesDelta is MachineNames answered, when the server still
// knows version, with the difference from it (Base set; endpoints.Apply
// turns the names of version into the new ones).
func (c *Client) MachineNamesDelta(ctx context.Context, machineID, version string) (*api.ClusterNames, error) {
	return c.machineNames(ctx, machineID, url.Values{"version": {version}, "delta": {"true"}})
}

func (c *Client) machineNames(ctx context.Context, machineID string, q url.Values) (*api.ClusterNames, error) {
	var out api.ClusterNames
	if err := c.getJSON(ctx, "/v1/machines/"+url.PathEscape(machineID)+"/names?"+q.Encode(), &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// WaitAssignments is an agent's poll for a change of its machine's
// assignments after revision since (negative: the first poll, answered
// at once with the revision to poll from); the server holds it until the
// change, or for its own wait.
func (c *Client) WaitAssignments(ctx context.Context, machineID string, since int64) (*api.AssignmentsWait, error) {
	var out api.AssignmentsWait
	q := url.Values{}
	if since >= 0 {
		q.Set("since", strconv.FormatInt(since, 10))
	}
	if err := c.getJSON(ctx, "/v1/machines/"+url.PathEscape(machineID)+"/assignments/wait?"+q.Encode(), &out); err != nil {
		return nil, err
	}
	return &out, nil
}
