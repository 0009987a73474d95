// Package endpoints decides which replicas of a service receive traffic:
// the serving ones (running, passing their health check, on a machine
// that is reachable and not going away). Everything that routes — the
// agents' DNS, the endpoints API — reads this one decision. It is a pure
// function of what the store holds.
package endpoints

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sort"

	"github.com/gantry-dev/gantry/api"
)

// DefaultWeight is a serving replica's share when nothing weighs it.
const DefaultWeight = 1

// Of is a service's endpoints: each of its replicas with whether it
// serves, and why (machines by id).
func Of(svc *api.Service, replicas []*api.Replica, machines map[string]*api.Machine) api.ServiceEndpoints {
	out := api.ServiceEndpoints{Service: svc.Metadata.Name, Cluster: svc.Spec.Cluster,
		Name: api.ServiceName(svc.Metadata.Name, svc.Spec.Cluster), Endpoints: []api.Endpoint{}}
	for _, r := range replicas {
		if r.Service != svc.Metadata.Name {
			continue
		}
		out.Endpoints = append(out.Endpoints, endpointOf(svc, r, machines))
	}
	sort.Slice(out.Endpoints, func(i, j int) bool { return out.Endpoints[i].Replica < out.Endpoints[j].Replica })
	return out
}

func endpointOf(svc *api.Service, r *api.Replica, machines map[string]*api.Machine) api.Endpoint {
	if r.Pod != "" {
		return podEndpoint(svc, r)
	}
	if e, ok := leavingCopy(svc, r, machines); ok {
		return e
	}
	e := api.Endpoint{Replica: r.ID, Machine: r.Machine, Revision: r.SpecHash, Address: r.Address, Weight: DefaultWeight, Ports: portsOf(svc, r.HostPorts)}
	e.Reason = whyNotServing(svc, r, machines[r.Machine])
	if e.Reason == "" {
		e.Serving, e.Reason = true, "serving"
	}
	return e
}

func portsOf(svc *api.Service, hostPorts map[string]int) map[string]int {
	var out map[string]int
	for _, p := range svc.Spec.Ports {
		if port := hostPorts[p.Name]; port > 0 {
			if out == nil {
				out = map[string]int{}
			}
			out[p.Name] = port
		}
	}
	return out
}

// podEndpoint is a replica that runs as a Pod on a Kubernetes cluster:
// reached at the Pod's address (from the API server) and its container
// ports, serving once the Pod runs and is ready.
func podEndpoint(svc *api.Service, r *api.Replica) api.Endpoint {
	e := api.Endpoint{Replica: r.ID, Machine: r.Node, Revision: r.SpecHash, Address: r.Address, Weight: DefaultWeight}
	for _, p := range svc.Spec.Ports {
		if p.ContainerPort > 0 {
			if e.Ports == nil {
				e.Ports = map[string]int{}
			}
			e.Ports[p.Name] = p.ContainerPort
		}
	}
	switch {
	case r.RetiringSince != nil:
		e.Reason = "retiring: " + r.RetireReason
	case r.State != api.ReplicaRunning:
		e.Reason = "not running (" + string(r.State) + ")"
	case svc.Spec.HealthCheck != nil && r.Health != api.HealthHealthy:
		e.Reason = "not ready (" + string(r.Health) + ")"
	case r.Address == "":
		e.Reason = "no Pod address yet"
	default:
		e.Serving, e.Reason = true, "serving (Pod "+r.Pod+")"
	}
	return e
}

// KubernetesName is the name a service answers on a Kubernetes cluster:
// the Service Gantry creates for it in its namespace.
func KubernetesName(service, namespace string) string {
	return service + "." + namespace + ".svc"
}

// leavingCopy is the endpoint of a moving replica whose new copy does
// not run yet: the old copy, which serves until then, when its machine
// is reachable.
func leavingCopy(svc *api.Service, r *api.Replica, machines map[string]*api.Machine) (api.Endpoint, bool) {
	if r.PreviousMachine == "" || r.PreviousAddress == "" || r.State == api.ReplicaRunning || r.RetiringSince != nil {
		return api.Endpoint{}, false
	}
	m := machines[r.PreviousMachine]
	if m == nil || !m.Live() || m.UnreachableSince != nil || m.FleetState == api.FleetTerminating {
		return api.Endpoint{}, false
	}
	return api.Endpoint{Replica: r.ID, Machine: r.PreviousMachine, Revision: r.SpecHash, Address: r.PreviousAddress, Ports: portsOf(svc, r.PreviousPorts),
		Weight: DefaultWeight, Serving: true, Reason: "serving on " + r.PreviousMachine + " until its copy on " + r.Machine + " runs"}, true
}

// whyNotServing says why a replica takes no traffic ("" when it does).
func whyNotServing(svc *api.Service, r *api.Replica, m *api.Machine) string {
	switch {
	case r.RetiringSince != nil:
		return "retiring: " + r.RetireReason
	case r.Machine == "":
		return "not placed yet"
	case m == nil || !m.Live():
		return "its machine " + r.Machine + " is gone"
	case m.UnreachableSince != nil:
		return "its machine " + r.Machine + " is unreachable"
	case m.FleetState == api.FleetTerminating:
		return "its machine " + r.Machine + " is terminating"
	case r.PreviousMachine != "" && r.State != api.ReplicaRunning:
		return "moving from machine " + r.PreviousMachine + ": serves once it runs on " + r.Machine
	case r.State != api.ReplicaRunning:
		return "not running (" + string(r.State) + ")"
	case svc.Spec.HealthCheck != nil && r.Health != api.HealthHealthy:
		return "health check not passing (" + string(r.Health) + ")"
	case r.Address == "":
		return "no address reported yet"
	case len(svc.Spec.Ports) > 0 && len(r.HostPorts) == 0:
		return "no port reported yet"
	}
	return ""
}

// canaryScale multiplies the weights of a canary split, so that each
// side's share is kept to a percent or better and HAProxy's largest
// weight (256) is never passed.
const canaryScale = 2

// WeighCanary splits a service's requests during a canary: while dep
// (its current deployment) waits for promotion, the serving replicas of
// the new revision take CanaryWeight percent together and the others
// the rest, each side shared equally. Otherwise it leaves set as is.
func WeighCanary(set *api.ServiceEndpoints, svc *api.Service, dep *api.Deployment) {
	weight := svc.Spec.Update.CanaryWeight
	if weight <= 0 || dep == nil || dep.Done() || dep.Promoted || svc.Spec.Update.Canary == 0 {
		return
	}
	var canaries, others int
	for _, e := range set.Endpoints {
		switch {
		case !e.Serving:
		case e.Revision == dep.Revision:
			canaries++
		default:
			others++
		}
	}
	if canaries == 0 || others == 0 {
		return
	}
	for i := range set.Endpoints {
		e := &set.Endpoints[i]
		if e.Revision == dep.Revision {
			e.Weight = max(1, weight*canaryScale/canaries)
		} else {
			e.Weight = max(1, (100-weight)*canaryScale/others)
		}
	}
}

// Serving is the serving endpoints of a set.
func Serving(set api.ServiceEndpoints) []api.Endpoint {
	out := []api.Endpoint{}
	for _, e := range set.Endpoints {
		if e.Serving {
			out = append(out, e)
		}
	}
	return out
}

// Names are a cluster's DNS answers: each service's serving endpoints
// under its name, and each failover group's serving primary (groups maps
// a group's name to that endpoint, nil while none serves). Version
// changes whenever an answer does.
func Names(cluster string, services []api.ServiceEndpoints, groups map[string]*api.Endpoint, ingress []api.IngressRoute, edgeGroups []string) api.ClusterNames {
	out := api.ClusterNames{Cluster: cluster, Records: []api.NameRecord{}, EdgeGroups: edgeGroups}
	for _, set := range services {
		if set.Cluster == cluster {
			targets := Serving(set)
			sortTargets(targets)
			out.Records = append(out.Records, api.NameRecord{Name: set.Name, Targets: targets})
		}
	}
	for name, primary := range groups {
		rec := api.NameRecord{Name: api.ServiceName(name, cluster), Targets: []api.Endpoint{}}
		if primary != nil {
			rec.Targets = append(rec.Targets, *primary)
		}
		out.Records = append(out.Records, rec)
	}
	sort.Slice(out.Records, func(i, j int) bool { return out.Records[i].Name < out.Records[j].Name })
	out.Ingress = append([]api.IngressRoute(nil), ingress...)
	sort.Slice(out.Ingress, func(i, j int) bool { return out.Ingress[i].Port < out.Ingress[j].Port })
	out.Version = Version(out)
	return out
}

// Mesh is a cluster's overlay: every live machine that holds a /24, with
// its key and endpoint once it reported them.
func Mesh(containerCIDR string, machines []*api.Machine) *api.MeshConfig {
	out := &api.MeshConfig{ContainerCIDR: containerCIDR, Peers: []api.MeshPeer{}}
	holders := map[string]int{}
	for _, m := range machines {
		if m.Live() && m.Subnet != "" && m.FleetState != api.FleetTerminating {
			out.Peers = append(out.Peers, api.MeshPeer{Machine: m.ID, PublicKey: m.MeshKey, Endpoint: m.MeshEndpoint, Subnet: m.Subnet})
			holders[m.MeshKey]++
		}
	}
	for i, p := range out.Peers {
		if p.PublicKey != "" && holders[p.PublicKey] > 1 {
			// A key two machines claim is neither's: no traffic goes to it.
			out.Peers[i].PublicKey, out.Peers[i].Endpoint = "", ""
		}
	}
	sort.Slice(out.Peers, func(i, j int) bool { return out.Peers[i].Machine < out.Peers[j].Machine })
	return out
}

// Ingress are the routes of a service's exposed ports: its serving
// endpoints, each at the port its expose targets.
func Ingress(svc *api.Service, set api.ServiceEndpoints) []api.IngressRoute {
	var out []api.IngressRoute
	for _, e := range svc.Spec.Expose {
		route := api.IngressRoute{Name: svc.Metadata.Name, Port: e.Port, Protocol: e.Protocol, Backends: []api.IngressTarget{}}
		for _, ep := range Serving(set) {
			if port := ep.Ports[e.TargetPort]; port > 0 {
				route.Backends = append(route.Backends, api.IngressTarget{Replica: ep.Replica, Address: ep.Address, Port: port, Weight: ep.Weight})
			}
		}
		out = append(out, route)
	}
	return out
}

// EdgeGroups are the groups of a cluster whose role is edge.
func EdgeGroups(c *api.Cluster) []string {
	var out []string
	for _, g := range c.Spec.CapacityGroups {
		if g.Role == api.RoleEdge {
			out = append(out, g.GroupID)
		}
	}
	return out
}

// GroupIngress are the routes of a failover group's exposed ports: its
// serving primary alone (no backend while none serves: fencing,
// promoting), at the port each targets.
func GroupIngress(g *api.FailoverGroup, primary *api.Endpoint) []api.IngressRoute {
	var out []api.IngressRoute
	for _, e := range g.Spec.Template.Expose {
		route := api.IngressRoute{Name: g.Metadata.Name, Port: e.Port, Protocol: e.Protocol, Backends: []api.IngressTarget{}}
		if primary != nil && primary.Ports[e.TargetPort] > 0 {
			route.Backends = append(route.Backends, api.IngressTarget{Replica: primary.Replica, Address: primary.Address,
				Port: primary.Ports[e.TargetPort], Weight: primary.Weight})
		}
		out = append(out, route)
	}
	return out
}

// Version identifies a cluster's names: it changes whenever an answer,
// a route or a peer does.
func Version(names api.ClusterNames) string {
	names.Version = ""
	body, _ := json.Marshal(names) // plain data: cannot fail
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:12])
}
