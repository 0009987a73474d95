package endpoints_test

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/endpoints"
)

func webService(health bool) *api.Service {
	svc := &api.Service{Metadata: api.ObjectMeta{Name: "web"}, Spec: api.ServiceSpec{Cluster: "dev", Ports: []api.Port{{Name: "http"}}}}
	if health {
		svc.Spec.HealthCheck = &api.HealthCheck{}
	}
	return svc
}

func running(id, machine string) *api.Replica {
	return &api.Replica{ID: id, Service: "web", Cluster: "dev", Machine: machine, State: api.ReplicaRunning, Health: api.HealthHealthy,
		Address: "127.0.0.1", HostPorts: map[string]int{"http": 20000}}
}

// Only a running replica that passes its health check, on a machine that
// is reachable and staying, is in the name; every other says why not.
func TestOnlyServingReplicasAreInTheName(t *testing.T) {
	now := time.Now()
	machines := map[string]*api.Machine{
		"ok":          {ID: "ok", FleetState: api.FleetActive},
		"unreachable": {ID: "unreachable", FleetState: api.FleetActive, UnreachableSince: &now},
		"leaving":     {ID: "leaving", FleetState: api.FleetTerminating},
		"gone":        {ID: "gone", FleetState: api.FleetTerminated},
	}
	crashed := running("web-crashed", "ok")
	crashed.State = api.ReplicaCrashed
	unhealthy := running("web-unhealthy", "ok")
	unhealthy.Health = api.HealthUnhealthy
	moving := running("web-moving", "ok")
	moving.State, moving.PreviousMachine = api.ReplicaStarting, "leaving"
	noPort := running("web-noport", "ok")
	noPort.HostPorts = nil
	pending := &api.Replica{ID: "web-pending", Service: "web", State: api.ReplicaPending}
	other := running("api-0", "ok")
	other.Service = "api"
	replicas := []*api.Replica{running("web-0", "ok"), crashed, unhealthy, moving, noPort, pending, other,
		running("web-unreachable", "unreachable"), running("web-leaving", "leaving"), running("web-gone", "gone")}

	set := endpoints.Of(webService(true), replicas, machines)
	if set.Name != "web.dev.gantry." || len(set.Endpoints) != 9 {
		t.Fatalf("name %q with %d endpoints, want web.dev.gantry. with the service's 9 replicas", set.Name, len(set.Endpoints))
	}
	want := map[string]string{
		"web-0": "serving", "web-crashed": "not running (crashed)", "web-unhealthy": "health check not passing (unhealthy)",
		"web-moving": "moving from machine leaving: serves once it runs on ok", "web-noport": "no port reported yet",
		"web-pending": "not placed yet", "web-unreachable": "its machine unreachable is unreachable",
		"web-leaving": "its machine leaving is terminating", "web-gone": "its machine gone is gone",
	}
	for _, e := range set.Endpoints {
		if e.Reason != want[e.Replica] || e.Serving != (e.Replica == "web-0") {
			t.Errorf("%s: serving %v (%s), want %q", e.Replica, e.Serving, e.Reason, want[e.Replica])
		}
	}
	if serving := endpoints.Serving(set); len(serving) != 1 || serving[0].Ports["http"] != 20000 || serving[0].Weight != endpoints.DefaultWeight {
		t.Errorf("serving %+v, want web-0 with port http 20000 and the default weight", serving)
	}
	// Without a health check, a running replica serves whatever its
	// (unknown) health says.
	unknown := running("web-1", "ok")
	unknown.Health = api.HealthUnknown
	if set := endpoints.Of(webService(false), []*api.Replica{unknown}, machines); !set.Endpoints[0].Serving {
		t.Errorf("no health check: %+v, want serving", set.Endpoints[0])
	}
}

// A cluster's names carry its services and groups (a group's name is
// empty while no primary serves); the version changes with any answer
// and only then.
func TestNamesVersionFollowsTheAnswers(t *testing.T) {
	machines := map[string]*api.Machine{"ok": {ID: "ok", FleetState: api.FleetActive}}
	web := endpoints.Of(webService(false), []*api.Replica{running("web-0", "ok")}, machines)
	elsewhere := web
	elsewhere.Cluster = "prod"
	primary := &api.Endpoint{Replica: "pg-east-0", Address: "127.0.0.1", Ports: map[string]int{"postgres": 5432}, Serving: true}

	a := endpoints.Names("dev", []api.ServiceEndpoints{web, elsewhere}, map[string]*api.Endpoint{"pg": primary}, nil, nil)
	if len(a.Records) != 2 || a.Records[0].Name != "pg.dev.gantry." || a.Records[1].Name != "web.dev.gantry." || len(a.Records[0].Targets) != 1 {
		t.Fatalf("records %+v, want pg (its primary) and web of cluster dev only", a.Records)
	}
	same := endpoints.Names("dev", []api.ServiceEndpoints{web}, map[string]*api.Endpoint{"pg": primary}, nil, nil)
	if same.Version != a.Version {
		t.Errorf("the same answers gave versions %s and %s", a.Version, same.Version)
	}
	fencing := endpoints.Names("dev", []api.ServiceEndpoints{web}, map[string]*api.Endpoint{"pg": nil}, nil, nil)
	if fencing.Version == a.Version || len(fencing.Records[0].Targets) != 0 {
		t.Errorf("a group with no serving primary: %+v (version %s, before %s), want no target and a new version", fencing.Records[0], fencing.Version, a.Version)
	}
}

// An exposed port routes to the serving replicas only, at the port it
// targets; a change of its backends is a new version of the names.
func TestIngressRoutesTheServingReplicas(t *testing.T) {
	machines := map[string]*api.Machine{"ok": {ID: "ok", FleetState: api.FleetActive}}
	svc := webService(true)
	svc.Spec.Ports = append(svc.Spec.Ports, api.Port{Name: "admin"})
	svc.Spec.Expose = []api.Expose{{Port: 8080, TargetPort: "http", Protocol: api.ExposeHTTP}, {Port: 9090, TargetPort: "admin", Protocol: api.ExposeTCP}}
	serving := running("web-0", "ok")
	serving.HostPorts["admin"] = 20001
	retiring := running("web-1", "ok")
	since := time.Now()
	retiring.RetiringSince = &since
	set := endpoints.Of(svc, []*api.Replica{serving, retiring}, machines)

	routes := endpoints.Ingress(svc, set)
	if len(routes) != 2 {
		t.Fatalf("routes %+v, want one per exposed port", routes)
	}
	want := []api.IngressTarget{{Replica: "web-0", Address: "127.0.0.1", Port: 20000, Weight: endpoints.DefaultWeight}}
	if routes[0].Port != 8080 || routes[0].Protocol != api.ExposeHTTP || !reflect.DeepEqual(routes[0].Backends, want) {
		t.Errorf("port 8080: %+v, want http to web-0's http port only", routes[0])
	}
	if routes[1].Port != 9090 || len(routes[1].Backends) != 1 || routes[1].Backends[0].Port != 20001 {
		t.Errorf("port 9090: %+v, want web-0's admin port", routes[1])
	}

	before := endpoints.Names("dev", []api.ServiceEndpoints{set}, nil, routes, nil)
	set.Endpoints[0].Serving = false
	after := endpoints.Names("dev", []api.ServiceEndpoints{set}, nil, endpoints.Ingress(svc, set), nil)
	if before.Version == after.Version || len(after.Ingress) != 2 || len(after.Ingress[0].Backends) != 0 {
		t.Errorf("no serving replica: %+v (version %s, before %s), want empty backends and a new version", after.Ingress, after.Version, before.Version)
	}
}

// A replica moving off a draining machine serves from its old copy until
// the new one runs, and no longer once the old machine goes away.
func TestAMovingReplicaServesFromItsOldCopy(t *testing.T) {
	machines := map[string]*api.Machine{"old": {ID: "old", FleetState: api.FleetDraining}, "new": {ID: "new", FleetState: api.FleetActive}}
	r := running("web-0", "new")
	r.State, r.Address, r.HostPorts = api.ReplicaStarting, "10.0.0.2", nil
	r.PreviousMachine, r.PreviousAddress, r.PreviousPorts = "old", "10.0.0.1", map[string]int{"http": 20000}
	e := endpoints.Of(webService(true), []*api.Replica{r}, machines).Endpoints[0]
	if !e.Serving || e.Machine != "old" || e.Address != "10.0.0.1" || e.Ports["http"] != 20000 {
		t.Fatalf("moving: %+v, want served by its copy on old at 10.0.0.1:20000", e)
	}
	machines["old"].FleetState = api.FleetTerminating
	if e := endpoints.Of(webService(true), []*api.Replica{r}, machines).Endpoints[0]; e.Serving {
		t.Fatalf("old machine terminating: %+v, want not serving", e)
	}
}

// During a canary the new revision's serving replicas take the canary
// weight together, the old ones the rest; before the canaries serve, and
// once promoted, every replica weighs the same.
func TestCanaryWeightSplitsRequestsByRevision(t *testing.T) {
	machines := map[string]*api.Machine{"ok": {ID: "ok", FleetState: api.FleetActive}}
	svc := webService(true)
	svc.Spec.Update.Canary, svc.Spec.Update.CanaryWeight = 1, 10
	var replicas []*api.Replica
	for i, rev := range []string{"old", "old", "old", "old", "new"} {
		r := running(fmt.Sprintf("web-%d", i), "ok")
		r.SpecHash = rev
		replicas = append(replicas, r)
	}
	dep := &api.Deployment{Service: "web", Revision: "new", State: api.DeployProgressing}
	set := endpoints.Of(svc, replicas, machines)
	endpoints.WeighCanary(&set, svc, dep)
	total, canary := 0, 0
	for _, e := range set.Endpoints {
		total += e.Weight
		if e.Revision == "new" {
			canary += e.Weight
		}
	}
	if canary*100 != 10*total {
		t.Fatalf("canary weight %d of %d, want 10%%: %+v", canary, total, set.Endpoints)
	}
	for _, dep := range []*api.Deployment{{Revision: "new", State: api.DeployProgressing, Promoted: true}, {Revision: "new", State: api.DeployComplete}, nil} {
		set := endpoints.Of(svc, replicas, machines)
		endpoints.WeighCanary(&set, svc, dep)
		for _, e := range set.Endpoints {
			if e.Weight != endpoints.DefaultWeight {
				t.Fatalf("deployment %+v: %s weighs %d, want the default", dep, e.Replica, e.Weight)
			}
		}
	}
}

// A failover group's exposed port routes to its serving primary alone,
// and to nothing while none serves.
func TestGroupIngressRoutesThePrimaryOnly(t *testing.T) {
	g := &api.FailoverGroup{Metadata: api.ObjectMeta{Name: "pg"}, Spec: api.FailoverGroupSpec{Template: api.ServiceSpec{
		Ports: []api.Port{{Name: "postgres"}}, Expose: []api.Expose{{Port: 5432, TargetPort: "postgres", Protocol: api.ExposeTCP}}}}}
	primary := &api.Endpoint{Replica: "pg-east-0", Address: "10.0.0.1", Ports: map[string]int{"postgres": 20000}, Weight: 1, Serving: true}
	routes := endpoints.GroupIngress(g, primary)
	want := []api.IngressRoute{{Name: "pg", Port: 5432, Protocol: api.ExposeTCP, Backends: []api.IngressTarget{{Replica: "pg-east-0", Address: "10.0.0.1", Port: 20000, Weight: 1}}}}
	if !reflect.DeepEqual(routes, want) {
		t.Fatalf("routes %+v, want the primary only", routes)
	}
	if routes := endpoints.GroupIngress(g, nil); len(routes) != 1 || len(routes[0].Backends) != 0 {
		t.Fatalf("no serving primary: %+v, want the port with no backend (connections refused)", routes)
	}
}

// An overlay's peers are its live machines with a /24 (a leaving one is
// gone at once); a key two machines claim is neither's.
func TestMeshPeers(t *testing.T) {
	machines := []*api.Machine{
		{ID: "a", Subnet: "10.244.0.0/24", FleetState: api.FleetActive, MeshKey: "ka", MeshEndpoint: "192.0.2.1:51820"},
		{ID: "b", Subnet: "10.244.1.0/24", FleetState: api.FleetActive, MeshKey: "same", MeshEndpoint: "192.0.2.2:51820"},
		{ID: "c", Subnet: "10.244.2.0/24", FleetState: api.FleetActive, MeshKey: "same", MeshEndpoint: "192.0.2.3:51820"},
		{ID: "d", Subnet: "10.244.3.0/24", FleetState: api.FleetTerminating, MeshKey: "kd"},
		{ID: "e", FleetState: api.FleetActive},
	}
	mesh := endpoints.Mesh("10.244.0.0/16", machines)
	want := []api.MeshPeer{{Machine: "a", PublicKey: "ka", Endpoint: "192.0.2.1:51820", Subnet: "10.244.0.0/24"},
		{Machine: "b", Subnet: "10.244.1.0/24"}, {Machine: "c", Subnet: "10.244.2.0/24"}}
	if !reflect.DeepEqual(mesh.Peers, want) {
		t.Fatalf("peers %+v, want %+v", mesh.Peers, want)
	}
	if api.MeshAddress("10.244.3.0/24") != "10.244.3.1" {
		t.Fatalf("mesh address %s", api.MeshAddress("10.244.3.0/24"))
	}
}
