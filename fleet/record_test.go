package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/store"
	"github.com/gantry-dev/gantry/store/sqlite/sqlitetest"
)

// An intent whose random id is taken never overwrites the machine that has
// it: it is recorded under another id (defect: two agents took one
// machine's credential from each other in turn).
func TestIntentWithATakenIDDrawsAnother(t *testing.T) {
	st := sqlitetest.Open(t)
	now := time.Now()
	cl := &api.Cluster{Metadata: api.ObjectMeta{Name: "c"}, Spec: api.ClusterSpec{ContainerCIDR: "10.244.0.0/16",
		CapacityGroups: []api.CapacityGroup{{GroupID: "g", MaxSize: 3}}}}
	live := &api.Machine{ID: "c-g-taken", Cluster: "c", Group: "g", Subnet: "10.244.0.0/24", ProviderID: "i-live",
		JoinState: api.JoinJoined, FleetState: api.FleetActive}
	ids := []string{"c-g-taken", "c-g-fresh"}
	next := func(string, string) string { id := ids[0]; ids = ids[1:]; return id }
	var m *api.Machine
	var err error
	err = st.Update(context.Background(), func(tx store.Tx) error {
		if err := tx.CreateMachine(live); err != nil {
			return err
		}
		m, err = RecordIntent(tx, Intent{Cluster: cl, Group: "g", InstanceType: "t"}, now, next)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if m.ID != "c-g-fresh" || m.Subnet != "10.244.1.0/24" || m.JoinState != api.JoinProvisioning {
		t.Fatalf("intent %+v", m)
	}
	_ = st.View(context.Background(), func(tx store.Tx) error {
		got, err := tx.GetMachine("c-g-taken")
		if err != nil || got.ProviderID != "i-live" || got.JoinState != api.JoinJoined {
			t.Fatalf("the live machine was overwritten: %+v %v", got, err)
		}
		return nil
	})
}

// Machine ids are 60 random bits: 200,000 of them do not collide (the
// odds that they would are about one in a hundred million).
func TestMachineIDsDoNotCollide(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 200000; i++ {
		id := NewMachineID("c", "g")
		if seen[id] {
			t.Fatalf("collision after %d ids: %s", i, id)
		}
		seen[id] = true
	}
}
