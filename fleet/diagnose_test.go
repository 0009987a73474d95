package fleet

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/auth"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/store"
	"github.com/gantry-dev/gantry/store/sqlite"
)

// consoleProvider launches instances that never join and whose console
// shows how far their boot got.
type consoleProvider struct {
	console string
	spec    provisioner.LaunchSpec
}

func (p *consoleProvider) Name() string { return "fake" }
func (p *consoleProvider) Launch(_ context.Context, s provisioner.LaunchSpec) (*provisioner.Instance, error) {
	p.spec = s
	return &provisioner.Instance{ID: "i-1", State: provisioner.StatePending, Tags: s.Tags}, nil
}
func (p *consoleProvider) Terminate(context.Context, string) error { return nil }
func (p *consoleProvider) Stop(context.Context, string) error      { return provisioner.ErrUnsupported }
func (p *consoleProvider) Start(context.Context, string) (*provisioner.Instance, error) {
	return nil, provisioner.ErrUnsupported
}
func (p *consoleProvider) Describe(context.Context, string) (*provisioner.Instance, error) {
	return &provisioner.Instance{ID: "i-1", State: provisioner.StateRunning}, nil
}
func (p *consoleProvider) List(context.Context, provisioner.Filter) ([]provisioner.Instance, error) {
	return nil, nil
}
func (p *consoleProvider) InstanceTypes() []provisioner.InstanceType {
	return []provisioner.InstanceType{{Name: "t", MilliCPU: 1000, MemoryBytes: 1 << 30, Offerings: []provisioner.Offering{{Zone: "z", CapacityType: "onDemand", PricePerHour: 1}}}}
}
func (p *consoleProvider) CapacityTypes() []string                     { return []string{"onDemand"} }
func (p *consoleProvider) PriceHint(provisioner.Shape) (float64, bool) { return 1, true }
func (p *consoleProvider) ConsoleOutput(context.Context, string) (string, error) {
	return p.console, nil
}

// A machine that never joins is replaced with an event that carries its
// last boot step and console tail, with tokens redacted; the launch got
// the cluster's provider settings.
func TestJoinTimeoutEventCarriesBootDiagnostics(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.DefaultConfig(filepath.Join(t.TempDir(), "db")))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	signer, err := auth.NewSigner([]byte(auth.NewKey()))
	if err != nil {
		t.Fatal(err)
	}
	prov := &consoleProvider{console: "boot...\n[gantry-boot] start\n[gantry-boot] download\ntoken gjt1.abc.def leaked\ncurl: (6) Could not resolve host: downloads.example.com\n"}
	cfg := DefaultConfig("http://server", "inst")
	f := New(cfg, st, NewProviders(Static{"fake": prov}, nil), signer, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	c := &api.Cluster{Kind: api.KindCluster, Metadata: api.ObjectMeta{Name: "c"}, Spec: api.ClusterSpec{
		Provider:      api.ProviderSpec{Name: "fake", Region: "r-1", Config: map[string]string{"image": "img-1"}},
		ContainerCIDR: "10.244.0.0/16", CapacityGroups: []api.CapacityGroup{{GroupID: "g", InstanceType: "t", MaxSize: 1}}}}
	if err := st.Update(ctx, func(tx store.Tx) error { return tx.PutCluster(c) }); err != nil {
		t.Fatal(err)
	}
	it := prov.InstanceTypes()[0]
	if err := f.Launch(ctx, c, c.Spec.CapacityGroups[0], it, it.Offerings[0], "test"); err != nil {
		t.Fatal(err)
	}
	if prov.spec.Region != "r-1" || prov.spec.Config["image"] != "img-1" {
		t.Errorf("launch spec lacks the cluster's provider settings: region %q config %v", prov.spec.Region, prov.spec.Config)
	}
	var machines []*api.Machine
	_ = st.View(ctx, func(tx store.Tx) error {
		machines, err = tx.ListMachines(store.MachineFilter{})
		return err
	})
	if len(machines) != 1 || machines[0].ProviderKey != "fake" {
		t.Fatalf("machines %+v", machines)
	}
	f.Check(ctx, machines, time.Now().Add(cfg.JoinTimeout+time.Minute))
	f.Wait()
	var events []*api.Event
	_ = st.View(ctx, func(tx store.Tx) error {
		events, err = tx.ListEvents(store.EventFilter{ObjectKind: "Machine", ObjectName: machines[0].ID})
		return err
	})
	var msg string
	for _, e := range events {
		if e.Reason == "Terminating" {
			msg = e.Message
		}
	}
	for _, want := range []string{"did not join within", "last boot step: download", "Could not resolve host", "<redacted>"} {
		if !strings.Contains(msg, want) {
			t.Errorf("terminating event lacks %q: %q", want, msg)
		}
	}
	if strings.Contains(msg, "gjt1.abc") {
		t.Error("a token from the console reached an event")
	}
}
