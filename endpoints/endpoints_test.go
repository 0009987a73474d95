package endpoints_test

import (
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

	a := endpoints.Names("dev", []api.ServiceEndpoints{web, elsewhere}, map[string]*api.Endpoint{"pg": primary})
	if len(a.Records) != 2 || a.Records[0].Name != "pg.dev.gantry." || a.Records[1].Name != "web.dev.gantry." || len(a.Records[0].Targets) != 1 {
		t.Fatalf("records %+v, want pg (its primary) and web of cluster dev only", a.Records)
	}
	same := endpoints.Names("dev", []api.ServiceEndpoints{web}, map[string]*api.Endpoint{"pg": primary})
	if same.Version != a.Version {
		t.Errorf("the same answers gave versions %s and %s", a.Version, same.Version)
	}
	fencing := endpoints.Names("dev", []api.ServiceEndpoints{web}, map[string]*api.Endpoint{"pg": nil})
	if fencing.Version == a.Version || len(fencing.Records[0].Targets) != 0 {
		t.Errorf("a group with no serving primary: %+v (version %s, before %s), want no target and a new version", fencing.Records[0], fencing.Version, a.Version)
	}
}
