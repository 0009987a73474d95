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
		out.Endpoints = append(out.Endpoints, endpointOf(svc, r, machines[r.Machine]))
	}
	sort.Slice(out.Endpoints, func(i, j int) bool { return out.Endpoints[i].Replica < out.Endpoints[j].Replica })
	return out
}

func endpointOf(svc *api.Service, r *api.Replica, m *api.Machine) api.Endpoint {
	e := api.Endpoint{Replica: r.ID, Machine: r.Machine, Address: r.Address, Weight: DefaultWeight}
	for _, p := range svc.Spec.Ports {
		if port := r.HostPorts[p.Name]; port > 0 {
			if e.Ports == nil {
				e.Ports = map[string]int{}
			}
			e.Ports[p.Name] = port
		}
	}
	e.Reason = whyNotServing(svc, r, m)
	if e.Reason == "" {
		e.Serving, e.Reason = true, "serving"
	}
	return e
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
func Names(cluster string, services []api.ServiceEndpoints, groups map[string]*api.Endpoint) api.ClusterNames {
	out := api.ClusterNames{Cluster: cluster, Records: []api.NameRecord{}}
	for _, set := range services {
		if set.Cluster == cluster {
			out.Records = append(out.Records, api.NameRecord{Name: set.Name, Targets: Serving(set)})
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
	out.Version = version(out.Records)
	return out
}

func version(records []api.NameRecord) string {
	body, _ := json.Marshal(records) // plain data: cannot fail
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:12])
}
