package server

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/client"
)

const webService = `kind: Service
metadata: {name: web}
spec:
  cluster: dev
  command: ["sleep", "1000"]
  ports: [{name: http}]
  replicas: 1
  resources: {cpu: 100m, memory: 64Mi}
`

// applyWebOnM1 applies webService and waits for its replica to be
// placed on machine m1 (the only machine of cluster dev).
func applyWebOnM1(t *testing.T, ts *testServer) *api.Replica {
	t.Helper()
	ctx := context.Background()
	if _, err := ts.admin.Apply(ctx, []byte(webService)); err != nil {
		t.Fatal(err)
	}
	var placed *api.Replica
	waitFor(t, 10*time.Second, "web-0 placed on m1", func() bool {
		r, err := ts.admin.GetReplica(ctx, "web-0")
		placed = r
		return err == nil && r.Machine == "m1"
	})
	return placed
}

// A service's endpoints follow its replica's reports: in the name once
// it runs, out (with why) once it crashes; an agent waiting for its
// cluster's names is answered when they change, with the new version,
// and a machine of another cluster sees none of them. The names follow
// the change feed: the safety refresh is off (an hour).
func TestEndpointsFollowReplicasAndWakeTheAgentsPoll(t *testing.T) {
	ts, ctx := withTestCluster(t, func(c *Config) { c.Names.Refresh = time.Hour })
	join := func(cluster, id string) *client.Client {
		tok, err := ts.admin.CreateJoinToken(ctx, api.JoinTokenRequest{Cluster: cluster, Group: "general"})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := ts.admin.Join(ctx, api.JoinRequest{Token: tok.Token, Cluster: cluster, MachineID: id,
			Inventory: api.Inventory{Capacity: api.Resources{MilliCPU: 1000, MemoryBytes: 1 << 30}, Runtimes: []string{"process"},
				Addresses: []string{"127.0.0.7"}, DNSAddress: "127.0.0.1:5353"}})
		if err != nil {
			t.Fatal(err)
		}
		return client.New(ts.URL(), resp.Credential, ts.http)
	}
	agent, stranger := join("dev", "m1"), join("other", "m2")
	if m, err := ts.admin.GetMachine(ctx, "m1"); err != nil || m.DNSAddress != "127.0.0.1:5353" {
		t.Fatalf("the machine's DNS address: %+v %v", m, err)
	}
	placed := applyWebOnM1(t, ts)
	set, err := ts.admin.ServiceEndpoints(ctx, "web")
	if err != nil || len(set.Endpoints) != 1 || set.Endpoints[0].Serving {
		t.Fatalf("endpoints before it runs: %+v %v, want web-0 not serving", set, err)
	}
	first, err := agent.MachineNames(ctx, "m1", "")
	if err != nil || first.Cluster != "dev" || len(first.Records) != 1 || len(first.Records[0].Targets) != 0 {
		t.Fatalf("names before it runs: %+v %v, want web.dev.gantry. with no target", first, err)
	}
	report := func(state api.ReplicaState) {
		t.Helper()
		st := api.ReplicaStatus{ReplicaID: "web-0", Incarnation: placed.Incarnation, SpecHash: placed.SpecHash, State: state,
			HostPorts: map[string]int{"http": 18080}}
		if _, err := agent.Heartbeat(ctx, "m1", api.HeartbeatRequest{Replicas: []api.ReplicaStatus{st}, Sequence: time.Now().UnixNano()}); err != nil {
			t.Fatal(err)
		}
	}
	// The poll waits for a version other than the agent's; the running
	// report changes the names while it waits.
	type answer struct {
		names *api.ClusterNames
		err   error
	}
	waiting := make(chan answer, 1)
	go func() {
		n, err := agent.MachineNames(ctx, "m1", first.Version)
		waiting <- answer{n, err}
	}()
	report(api.ReplicaRunning)
	got := <-waiting
	if got.err != nil || got.names.Version == first.Version {
		t.Fatalf("the waiting poll: %+v %v, want the names after the change", got.names, got.err)
	}
	if targets := got.names.Records[0].Targets; len(targets) != 1 || targets[0].Address != "127.0.0.7" || targets[0].Ports["http"] != 18080 {
		t.Fatalf("web's targets %+v, want 127.0.0.7:18080", targets)
	}
	report(api.ReplicaCrashed)
	set, err = ts.admin.ServiceEndpoints(ctx, "web")
	if err != nil || set.Endpoints[0].Serving || set.Endpoints[0].Reason != "not running (crashed)" {
		t.Fatalf("endpoints after a crash: %+v %v", set, err)
	}
	after, err := agent.MachineNames(ctx, "m1", got.names.Version)
	if err != nil || len(after.Records[0].Targets) != 0 {
		t.Fatalf("names after a crash: %+v %v, want web with no target", after, err)
	}
	other, err := stranger.MachineNames(ctx, "m2", "")
	if err != nil || other.Cluster != "other" || len(other.Records) != 0 {
		t.Fatalf("a machine of cluster other: %+v %v, want no names", other, err)
	}
	if _, err := agent.MachineNames(context.Background(), "m2", ""); !client.IsStatus(err, 403) {
		t.Fatalf("m1's credential asking for m2's names: %v, want 403", err)
	}
}

// An exposed port reaches the agents with the names (the serving
// replicas behind it, and which groups serve it); a port another
// service of the cluster exposes is refused, naming the field and the
// service, and changes nothing.
func TestExposedPortsReachTheAgentsAndAreNotShared(t *testing.T) {
	ts, ctx := withTestCluster(t, func(c *Config) { c.Names.Refresh = time.Hour })
	exposed := webService + "  expose: [{port: 8080}]\n"
	if _, err := ts.admin.Apply(ctx, []byte(exposed)); err != nil {
		t.Fatal(err)
	}
	agent := ts.joinManual(t, "dev", "m1")
	names, err := client.New(ts.URL(), agent, ts.http).MachineNames(ctx, "m1", "")
	if err != nil {
		t.Fatal(err)
	}
	want := api.IngressRoute{Name: "web", Port: 8080, Protocol: api.ExposeHTTP, Backends: []api.IngressTarget{}}
	if len(names.Ingress) != 1 || !reflect.DeepEqual(names.Ingress[0], want) || !names.Serves("general") {
		t.Fatalf("ingress %+v (edge groups %v), want web's port 8080 served by every group, no backend yet", names.Ingress, names.EdgeGroups)
	}

	services := func() string {
		list, err := ts.admin.ListServices(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for i := range list {
			list[i].Status = nil // the controller's: moves on its own
		}
		data, _ := json.Marshal(list)
		return string(data)
	}
	before := services()
	api2 := strings.ReplaceAll(exposed, "name: web", "name: api")
	_, err = ts.admin.Apply(ctx, []byte(api2))
	var apiErr *client.APIError
	if !errorAs(err, &apiErr) || apiErr.Status != 422 || apiErr.Field != "spec.expose[0].port" || !strings.Contains(apiErr.Message, "exposed by service web") {
		t.Fatalf("a second service on port 8080: %v, want 422 on spec.expose[0].port naming web", err)
	}
	if after := services(); after != before {
		t.Fatalf("the refused apply changed the services:\n%s\n%s", before, after)
	}
	// A failover group's template exposing it in cluster dev is refused
	// the same way (its sides' clusters both hold the port).
	group := "kind: FailoverGroup\nmetadata: {name: db}\nspec:\n  primary: {cluster: dev}\n  replica: {cluster: other}\n" +
		"  capability: {name: generic, generic: {promote: [\"true\"]}}\n  template:\n    command: [sleep, \"1000\"]\n    ports: [{name: db}]\n    expose: [{port: 8080}]\n"
	_, err = ts.admin.Apply(ctx, []byte(group))
	if !errorAs(err, &apiErr) || apiErr.Field != "spec.template.expose[0].port" || !strings.Contains(apiErr.Message, "exposed by service web") {
		t.Fatalf("a group on port 8080 of dev: %v, want 422 on spec.template.expose[0].port naming web", err)
	}
	// A service named like a group with a side in its cluster is
	// refused: both would be db.dev.gantry.
	clash := strings.ReplaceAll(strings.Replace(group, "expose: [{port: 8080}]", "expose: [{port: 9090}]", 1), "name: db}", "name: web}")
	_, err = ts.admin.Apply(ctx, []byte(clash))
	if !errorAs(err, &apiErr) || apiErr.Field != "metadata.name" || !strings.Contains(apiErr.Message, "web.dev.gantry.") {
		t.Fatalf("a group named like service web of dev: %v, want 422 on metadata.name", err)
	}
	// Moving the port from one service to another in one apply is fine.
	moved := webService + "---\n" + api2
	if _, err := ts.admin.Apply(ctx, []byte(moved)); err != nil {
		t.Fatalf("moving port 8080 from web to api: %v", err)
	}

	edge := strings.Replace(testCluster, "{groupId: general, instanceType: local.small, minSize: 0", "{groupId: general, role: edge, instanceType: local.small, minSize: 1", 1)
	if _, err := ts.admin.Apply(ctx, []byte(edge)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the edge group in the names", func() bool {
		n, err := client.New(ts.URL(), agent, ts.http).MachineNames(ctx, "m1", "")
		return err == nil && reflect.DeepEqual(n.EdgeGroups, []string{"general"}) && !n.Serves("gpu")
	})
}

// Clusters on one network get containerCidrs that do not overlap: the
// default moves to the next free /16, a named one that overlaps is
// refused, and a cluster that exists keeps its own.
func TestContainerCIDRsOfANetworkDoNotOverlap(t *testing.T) {
	ts, ctx := withTestCluster(t, nil)
	cidrs := map[string]string{}
	list, err := ts.admin.ListClusters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range list {
		cidrs[c.Metadata.Name] = c.Spec.ContainerCIDR
	}
	if cidrs["dev"] != "10.244.0.0/16" || cidrs["other"] != "10.245.0.0/16" {
		t.Fatalf("containerCidrs %v, want dev 10.244.0.0/16 and other (same host) 10.245.0.0/16", cidrs)
	}
	if _, err := ts.admin.Apply(ctx, []byte(testCluster)); err != nil {
		t.Fatalf("re-applying both: %v", err)
	}
	third := "kind: Cluster\nmetadata: {name: third}\nspec:\n  containerCidr: 10.245.128.0/17\n  capacityGroups:\n    - {groupId: general, instanceType: local.small, minSize: 0, maxSize: 3}\n"
	_, err = ts.admin.Apply(ctx, []byte(third))
	var apiErr *client.APIError
	if !errorAs(err, &apiErr) || apiErr.Field != "spec.containerCidr" || !strings.Contains(apiErr.Message, "overlaps cluster other's 10.245.0.0/16") {
		t.Fatalf("an overlapping containerCidr: %v, want 422 on spec.containerCidr naming other", err)
	}
}
