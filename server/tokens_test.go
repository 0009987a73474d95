package server

import (
	"net/http"
	"testing"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/client"
)

// Token scopes: a read-only token reads and changes nothing; a join token
// joins one cluster's group as many times as it may, and never calls the
// API; a revoked token is refused at once; listing shows no secret.
func TestTokenScopes(t *testing.T) {
	ts, ctx := withTestCluster(t, nil)
	ro, err := ts.admin.CreateToken(ctx, api.TokenRequest{Kind: api.TokenReadOnly, Description: "dashboards"})
	if err != nil {
		t.Fatal(err)
	}
	reader := ts.admin.WithToken(ro.Secret)
	if _, err := reader.ListClusters(ctx); err != nil {
		t.Fatalf("read-only token reading: %v", err)
	}
	before := ts.stateFingerprint(t)
	if _, err := reader.Apply(ctx, []byte(testCluster)); !client.IsStatus(err, http.StatusForbidden) {
		t.Fatalf("read-only token applying: %v, want 403", err)
	}
	if _, err := reader.CreateToken(ctx, api.TokenRequest{Kind: api.TokenAdmin}); !client.IsStatus(err, http.StatusForbidden) {
		t.Fatalf("read-only token minting an admin token: %v, want 403", err)
	}
	if ts.stateFingerprint(t) != before {
		t.Fatal("a refused call changed the state")
	}

	join, err := ts.admin.CreateToken(ctx, api.TokenRequest{Kind: api.TokenJoin, Cluster: "dev", Group: "general", MaxUses: 2})
	if err != nil {
		t.Fatal(err)
	}
	joinAs := func(cluster, id string) error {
		_, err := ts.admin.WithToken("").Join(ctx, api.JoinRequest{Token: join.Secret, Cluster: cluster, MachineID: id,
			Inventory: api.Inventory{Capacity: api.Resources{MilliCPU: 1000, MemoryBytes: 1 << 30}, Runtimes: []string{"process"}}})
		return err
	}
	if err := joinAs("other", "x1"); !client.IsStatus(err, http.StatusForbidden) {
		t.Fatalf("join token for another cluster: %v, want 403", err)
	}
	for _, id := range []string{"j1", "j2"} {
		if err := joinAs("dev", id); err != nil {
			t.Fatalf("join %s: %v", id, err)
		}
	}
	if err := joinAs("dev", "j3"); !client.IsStatus(err, http.StatusUnauthorized) {
		t.Fatalf("a third join on a 2-use token: %v, want 401", err)
	}
	if _, err := ts.admin.WithToken(join.Secret).ListClusters(ctx); !client.IsStatus(err, http.StatusForbidden) {
		t.Fatalf("a join token calling the API: %v, want 403", err)
	}

	if _, err := ts.admin.RevokeToken(ctx, ro.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := reader.ListClusters(ctx); !client.IsStatus(err, http.StatusUnauthorized) {
		t.Fatalf("revoked token: %v, want 401", err)
	}
	toks, err := ts.admin.ListTokens(ctx)
	if err != nil || len(toks) != 2 {
		t.Fatalf("tokens %+v %v", toks, err)
	}
	for _, tok := range toks {
		if tok.Kind == api.TokenJoin && tok.Uses != 2 {
			t.Errorf("join token uses %d, want 2", tok.Uses)
		}
	}
	status, body := ts.get(t, "/v1/tokens")
	if status != http.StatusUnauthorized {
		t.Fatalf("listing tokens without a token: %d %s", status, body)
	}
}
