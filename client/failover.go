package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/gantry-dev/gantry/api"
)

// ListFailoverGroups lists failover groups with their status.
func (c *Client) ListFailoverGroups(ctx context.Context) ([]api.FailoverGroup, error) {
	var out struct{ Items []api.FailoverGroup }
	return out.Items, c.getJSON(ctx, "/v1/failovergroups", &out)
}

// GetFailoverGroup returns one failover group with its status: its
// phase, epoch, and where the primary serves.
func (c *Client) GetFailoverGroup(ctx context.Context, name string) (*api.FailoverGroup, error) {
	var out api.FailoverGroup
	return &out, c.getJSON(ctx, "/v1/failovergroups/"+url.PathEscape(name), &out)
}

// DeleteFailoverGroup deletes a group and both its services.
func (c *Client) DeleteFailoverGroup(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "/v1/failovergroups/"+url.PathEscape(name), "", nil, nil)
}

// RequestFailover asks a group to promote its replica side or to revert
// to its spec's primary side (api.FailoverPromote, api.FailoverRevert).
func (c *Client) RequestFailover(ctx context.Context, name, action string) error {
	path := "/v1/failovergroups/" + url.PathEscape(name) + "/" + url.PathEscape(action)
	if action == api.FailoverPromoteAcceptDataLoss {
		path = "/v1/failovergroups/" + url.PathEscape(name) + "/" + api.FailoverPromote + "?acceptDataLoss=true"
	}
	return c.do(ctx, http.MethodPost, path, "", nil, nil)
}
