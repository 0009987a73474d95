package heartbeat

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/auth"
	"github.com/gantry-dev/gantry/server/secretread"
	"github.com/gantry-dev/gantry/store"
)

// secretFails is a transaction whose Secret reads fail with err.
type secretFails struct {
	store.Tx
	err error
}

func (s secretFails) GetSecret(string) (*api.Secret, string, error) { return nil, "", s.err }

// A replica whose Secret is gone is left out of its machine's
// assignments; a store error reading the Secret (PostgreSQL's
// serialization failure among them) is no missing Secret: the
// heartbeat's transaction fails with it, to be run again, and leaves
// nothing out. (Left out, the replica was stopped on its machine, and
// the transaction, aborted by PostgreSQL, failed at commit as
// "unavailable", which is not retried: heartbeats of failover members
// failed, and their machines were replaced.)
func TestAStoreErrorReadingASecretFailsTheAssignmentsInsteadOfLeavingOut(t *testing.T) {
	st := openStore(t)
	sealer, err := auth.NewSealer(strings.Repeat("ab", 32))
	if err != nil {
		t.Fatal(err)
	}
	svc := &api.Service{Kind: api.KindService, Metadata: api.ObjectMeta{Name: "db"},
		Spec: api.ServiceSpec{Cluster: "c", Command: []string{"db"}, SecretEnv: map[string]api.SecretKeyRef{"PASSWORD": {Name: "pg", Key: "password"}}}}
	m := &api.Machine{ID: "m1", Cluster: "c"}
	replicas := []*api.Replica{{ID: "db-0", Service: "db", Machine: "m1", SpecHash: "h"}}
	in := &Ingester{Log: slog.New(slog.DiscardHandler)}
	err = st.Update(context.Background(), func(tx store.Tx) error {
		if err := tx.PutService(svc); err != nil {
			return err
		}
		for _, c := range []struct {
			name    string
			err     error
			wantErr bool
		}{{"the Secret is missing", store.ErrNotFound, false}, {"the store fails", errors.New("could not serialize access (SQLSTATE 40001)"), true}} {
			failing := secretFails{Tx: tx, err: c.err}
			got, err := in.Assignments(failing, secretread.New(sealer, failing), m, replicas)
			if c.wantErr && (err == nil || !strings.Contains(err.Error(), "could not serialize")) {
				t.Errorf("%s: assignments %+v, error %v; want the store's error", c.name, got, err)
			}
			if !c.wantErr && (err != nil || len(got) != 0) {
				t.Errorf("%s: assignments %+v, error %v; want the replica left out", c.name, got, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
