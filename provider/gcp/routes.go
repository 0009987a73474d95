package gcp

import (
	"context"
	"net/http"

	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/provisioner"
	"google.golang.org/protobuf/proto"
)

// routePriority is the priority of machines' /24 routes (GCE's default).
const routePriority = 1000

// routeName is the route of an instance's /24: named after the instance,
// so a retried launch finds it (409) and Terminate knows it.
func routeName(instance string) string { return instance + "-subnet" }

// routeSubnet routes the machine's /24 to the instance in a cluster of
// network mode routed (the instance was made with canIpForward).
func (p *Provider) routeSubnet(ctx context.Context, spec provisioner.LaunchSpec, s Settings, zone, instance string) error {
	if spec.Bootstrap.NetworkMode != api.NetworkRouted {
		return nil
	}
	if spec.Subnet == "" {
		return provisioner.Errorf(provisioner.KindInvalid, "route", "network mode routed needs the machine's /24")
	}
	network, err := p.networkOf(ctx, s)
	if err != nil {
		return err
	}
	route := &computepb.Route{Name: proto.String(routeName(instance)), Network: proto.String(network), DestRange: proto.String(spec.Subnet),
		NextHopInstance: proto.String("projects/" + p.cfg.Project + "/zones/" + zone + "/instances/" + instance), Priority: proto.Uint32(routePriority),
		Description: proto.String(provisioner.TagMachine + "=" + spec.Bootstrap.MachineID + " " + provisioner.TagCluster + "=" + spec.Bootstrap.Cluster)}
	op, err := p.routes.Insert(ctx, &computepb.InsertRouteRequest{Project: p.cfg.Project, RouteResource: route})
	if err == nil {
		err = op.Wait(ctx)
	}
	if err != nil && !isStatus(err, http.StatusConflict) {
		return classify("route the machine's /24", err)
	}
	return nil
}

// unrouteSubnet deletes the route of an instance's /24 (none: nothing to
// do).
func (p *Provider) unrouteSubnet(ctx context.Context, instance string) error {
	op, err := p.routes.Delete(ctx, &computepb.DeleteRouteRequest{Project: p.cfg.Project, Route: routeName(instance)})
	if err == nil {
		err = op.Wait(ctx)
	}
	if err != nil && !isStatus(err, http.StatusNotFound) {
		return classify("delete the machine's route", err)
	}
	return nil
}

// Routes says whether a cluster's settings let GCE route each machine's
// /24 to it (network mode routed): always, on the cluster's network.
func Routes(p api.ProviderSpec) error {
	_, err := ParseSettings(p.Config)
	return err
}
