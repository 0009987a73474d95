package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/gantry-dev/gantry/decide"
	"github.com/gantry-dev/gantry/decide/settings"
	"github.com/gantry-dev/gantry/provider/clouds"
	gantryserver "github.com/gantry-dev/gantry/server"
	"github.com/gantry-dev/gantry/sim/policy"
)

// A simulation policy's keys are the server's decision flags, bound to
// the decide configuration the run uses; a server flag that decides
// nothing (its listen address) is not one.
func TestPolicySettingsAreTheServersDecisionFlags(t *testing.T) {
	cfg := decide.DefaultConfig()
	fs := pflag.NewFlagSet("policy", pflag.ContinueOnError)
	settings.Bind(fs, &cfg)
	p, err := policy.Read("patient.yaml", []byte("savings-floor: 0.25\nmin-lifetime: 1h\nempty-machine-ttl: 30m\nmax-removals: 3\nreschedule-grace: 2m\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Apply(fs); err != nil {
		t.Fatal(err)
	}
	pl := cfg.Planner
	if pl.SavingsFloor != 0.25 || pl.MinLifetime != time.Hour || pl.EmptyMachineTTL != 30*time.Minute || pl.MaxRemovals != 3 || cfg.RescheduleGrace != 2*time.Minute {
		t.Errorf("the policy did not reach the configuration: %+v, grace %s", pl, cfg.RescheduleGrace)
	}
	server := pflag.NewFlagSet("server", pflag.ContinueOnError)
	serverCfg, cloudCfg := gantryserver.DefaultConfig(""), clouds.Config{}
	serverFlags(server, &serverCfg, &cloudCfg)
	if server.Lookup("listen") == nil {
		t.Fatal("the server has no --listen flag: pick another flag that decides nothing")
	}
	bad, _ := policy.Read("bad.yaml", []byte("listen: :7400\n"))
	if err := bad.Apply(fs); err == nil || !strings.Contains(err.Error(), `"listen" is not a server setting`) {
		t.Fatalf("error %v", err)
	}
	fs.VisitAll(func(f *pflag.Flag) {
		if server.Lookup(f.Name) == nil {
			t.Errorf("policy setting --%s is not a flag of gantry server", f.Name)
		}
	})
}
