package endpoints

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/gantry-dev/gantry/api"
)

// randomNames draws a cluster's names: a few records of targets, an
// exposed port, a mesh.
func randomNames(rng *rand.Rand) api.ClusterNames {
	var services []api.ServiceEndpoints
	for s := range 1 + rng.IntN(4) {
		set := api.ServiceEndpoints{Service: fmt.Sprintf("s%d", s), Cluster: "dev", Name: api.ServiceName(fmt.Sprintf("s%d", s), "dev")}
		for r := range rng.IntN(6) {
			if rng.IntN(3) == 0 {
				continue
			}
			set.Endpoints = append(set.Endpoints, api.Endpoint{Replica: fmt.Sprintf("s%d-%d", s, r), Address: fmt.Sprintf("10.0.0.%d", rng.IntN(4)),
				Ports: map[string]int{"http": 8000 + rng.IntN(2)}, Weight: 100, Serving: rng.IntN(4) > 0})
		}
		services = append(services, set)
	}
	groups := map[string]*api.Endpoint{}
	if rng.IntN(2) == 0 {
		groups["pg"] = nil
		if rng.IntN(2) == 0 {
			groups["pg"] = &api.Endpoint{Replica: "pg-east-0", Address: "10.0.1.1", Weight: 100, Serving: true}
		}
	}
	var ingress []api.IngressRoute
	if rng.IntN(2) == 0 {
		ingress = append(ingress, api.IngressRoute{Name: "s0", Port: 8080, Protocol: "http", Backends: []api.IngressTarget{{Replica: "s0-0", Address: "10.0.0.1", Port: 8000 + rng.IntN(2), Weight: 100}}})
	}
	out := Names("dev", services, groups, ingress, []string{"edge"}[:rng.IntN(2)])
	if rng.IntN(2) == 0 {
		out.Mesh = &api.MeshConfig{Mode: api.NetworkOverlay, ContainerCIDR: "10.244.0.0/16", Peers: []api.MeshPeer{{Machine: "m1", Subnet: fmt.Sprintf("10.244.%d.0/24", rng.IntN(3))}}}
		out.Version = Version(out)
	}
	return out
}

// Applying the difference between any two names to the first gives the
// second, with its version; a delta from another version is refused.
func TestApplyOfDiffGivesTheNewNames(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 31))
	for i := range 2000 {
		base, cur := randomNames(rng), randomNames(rng)
		delta := Diff(base, cur)
		// Through JSON, as the agents get it.
		data, _ := json.Marshal(delta)
		var got api.ClusterNames
		if err := json.Unmarshal(data, &got); err != nil {
			t.Fatal(err)
		}
		applied, err := Apply(base, got)
		if err != nil {
			t.Fatalf("pair %d: %v\nbase %+v\ncur %+v\ndelta %s", i, err, base, cur, data)
		}
		if a, c := jsonOf(applied), jsonOf(cur); a != c {
			t.Fatalf("pair %d: applied %s, want %s", i, a, c)
		}
		if _, err := Apply(cur, got); err == nil && cur.Version != base.Version {
			t.Fatalf("pair %d: a delta from %s applied to %s", i, base.Version, cur.Version)
		}
	}
}

// A change of one replica among thousands is a delta of one target.
func TestDiffOfOneReplicaIsSmall(t *testing.T) {
	set := api.ServiceEndpoints{Service: "web", Cluster: "dev", Name: api.ServiceName("web", "dev")}
	for r := range 2000 {
		set.Endpoints = append(set.Endpoints, api.Endpoint{Replica: fmt.Sprintf("web-%d", r), Address: "10.0.0.1", Weight: 100, Serving: true})
	}
	base := Names("dev", []api.ServiceEndpoints{set}, nil, nil, nil)
	set.Endpoints[7].Serving = false
	cur := Names("dev", []api.ServiceEndpoints{set}, nil, nil, nil)
	delta := Diff(base, cur)
	if len(delta.Records) != 1 || len(delta.Records[0].Targets) != 0 || !reflect.DeepEqual(delta.Records[0].Removed, []string{"web-7"}) {
		t.Fatalf("delta %+v, want web-7 removed and nothing else", delta)
	}
	if data, _ := json.Marshal(delta); len(data) > 400 {
		t.Errorf("delta of %d bytes: %s", len(data), data)
	}
}

func jsonOf(v any) string {
	data, _ := json.Marshal(v)
	return string(data)
}
