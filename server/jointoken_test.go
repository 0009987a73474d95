package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/auth"
	"github.com/gantry-dev/gantry/client"
	"github.com/gantry-dev/gantry/store"
)

var smallInventory = api.Inventory{Capacity: api.Resources{MilliCPU: 1000, MemoryBytes: 1 << 30}, Runtimes: []string{"process"}}

// A launched machine's join token stays on its disk (or in its user
// data) after it joined: whoever reads it must not get the machine's
// credential, its assignments or their secrets.
func TestLaunchedMachinesTokenIsSingleUse(t *testing.T) {
	ts, ctx := withTestCluster(t, nil)
	now := time.Now().UTC()
	m := &api.Machine{ID: "m1", Cluster: "dev", Group: "general", InstanceType: "local.small", Provider: "external", ProviderKey: "external",
		ProviderID: "local-1", Zone: "local", LaunchKey: "lk-m1", JoinState: api.JoinBooting, FleetState: api.FleetReady, CreatedAt: now, StateChangedAt: now}
	if err := ts.store.Update(ctx, func(tx store.Tx) error { return tx.CreateMachine(m) }); err != nil {
		t.Fatal(err)
	}
	token, err := ts.signer.Mint(auth.JoinClaims{Cluster: "dev", Group: "general", MachineID: "m1", ExpiresAt: now.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	anonymous := ts.admin.WithToken("")
	first, err := anonymous.Join(ctx, api.JoinRequest{Token: token, Cluster: "dev", MachineID: "m1", Inventory: smallInventory})
	if err != nil {
		t.Fatal(err)
	}
	_, err = anonymous.Join(ctx, api.JoinRequest{Token: token, Cluster: "dev", MachineID: "m1", Inventory: smallInventory})
	if !client.IsStatus(err, http.StatusUnauthorized) || !strings.Contains(err.Error(), "joined already") {
		t.Fatalf("second join with the machine's token: %v, want 401 saying it joined already", err)
	}
	if _, err := ts.admin.WithToken(first.Credential).Heartbeat(ctx, "m1", api.HeartbeatRequest{}); err != nil {
		t.Fatalf("the real agent's credential stopped working: %v", err)
	}
}

// `gantry join-token` is single-use unless --reusable says otherwise.
func TestHandMintedJoinTokensCountTheirUses(t *testing.T) {
	ts, ctx := withTestCluster(t, nil)
	anonymous := ts.admin.WithToken("")
	join := func(token string, i int) error {
		_, err := anonymous.Join(ctx, api.JoinRequest{Token: token, Cluster: "dev", MachineID: fmt.Sprintf("hand-%d", i), Inventory: smallInventory})
		return err
	}
	once, err := ts.admin.CreateJoinToken(ctx, api.JoinTokenRequest{Cluster: "dev", Group: "general"})
	if err != nil {
		t.Fatal(err)
	}
	if err := join(once.Token, 0); err != nil {
		t.Fatal(err)
	}
	if err := join(once.Token, 1); !client.IsStatus(err, http.StatusUnauthorized) {
		t.Fatalf("second machine on a single-use token: %v, want 401", err)
	}
	three, err := ts.admin.CreateJoinToken(ctx, api.JoinTokenRequest{Cluster: "dev", Group: "general", Reusable: 3})
	if err != nil {
		t.Fatal(err)
	}
	for i := 10; i < 13; i++ {
		if err := join(three.Token, i); err != nil {
			t.Fatalf("join %d of 3: %v", i-9, err)
		}
	}
	if err := join(three.Token, 13); !client.IsStatus(err, http.StatusUnauthorized) {
		t.Fatalf("fourth machine on a token for three: %v, want 401", err)
	}
	if _, err := ts.admin.CreateJoinToken(ctx, api.JoinTokenRequest{Cluster: "dev", Group: "general", Reusable: -2}); !client.IsStatus(err, http.StatusBadRequest) || !strings.Contains(err.Error(), "reusable") {
		t.Fatalf("reusable -2: %v, want 400 naming the field", err)
	}
	machines, err := ts.admin.ListMachines(context.Background(), "")
	if err != nil || len(machines) != 4 {
		t.Fatalf("%d machines joined (%v), want 4", len(machines), err)
	}
}

// A hand-joined machine's id is a DNS label: no paths, no escapes, no
// dots, no 5,000 characters; nothing is registered for a refused one.
func TestJoinRefusesMachineIDsThatAreNotDNSLabels(t *testing.T) {
	ts, ctx := withTestCluster(t, nil)
	for _, id := range []string{"../../x", strings.Repeat("a", 5000), "evil\x1b[2Jname", "has.dot", "Upper", "-lead", "trail-"} {
		tok, err := ts.admin.CreateJoinToken(ctx, api.JoinTokenRequest{Cluster: "dev", Group: "general"})
		if err != nil {
			t.Fatal(err)
		}
		_, err = ts.admin.WithToken("").Join(ctx, api.JoinRequest{Token: tok.Token, Cluster: "dev", MachineID: id, Inventory: smallInventory})
		var apiErr *client.APIError
		if !errorAs(err, &apiErr) || apiErr.Status != http.StatusBadRequest || apiErr.Field != "machineId" {
			t.Fatalf("machineId %.20q: %v, want 400 naming machineId", id, err)
		}
		if strings.Contains(err.Error(), "\x1b") || len(err.Error()) > 400 {
			t.Fatalf("the refusal echoes the id raw: %.100q", err.Error())
		}
	}
	machines, err := ts.admin.ListMachines(ctx, "")
	if err != nil || len(machines) != 0 {
		t.Fatalf("refused joins registered %d machines (%v)", len(machines), err)
	}
}
