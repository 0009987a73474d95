package policy

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// knobs stands for the decision settings a server binds.
type knobs struct {
	floor    float64
	lifetime time.Duration
	removals int
}

func flagsFor(k *knobs) *pflag.FlagSet {
	fs := pflag.NewFlagSet("policy", pflag.ContinueOnError)
	fs.Float64Var(&k.floor, "savings-floor", 0.1, "")
	fs.DurationVar(&k.lifetime, "min-lifetime", 10*time.Minute, "")
	fs.IntVar(&k.removals, "max-removals", 5, "")
	return fs
}

func TestAPolicySetsItsSettings(t *testing.T) {
	p, err := Read("policies/patient.yaml", []byte("savings-floor: 0.25\nmin-lifetime: 1h\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "patient" || len(p.Settings) != 2 {
		t.Fatalf("%+v", p)
	}
	var k knobs
	if err := p.Apply(flagsFor(&k)); err != nil {
		t.Fatal(err)
	}
	if k.floor != 0.25 || k.lifetime != time.Hour || k.removals != 5 {
		t.Errorf("settings %+v: want the floor and lifetime set, the rest at their defaults", k)
	}
	named, err := Read("b.yaml", []byte("name: eager\nmax-removals: 20\n"))
	if err != nil || named.Name != "eager" {
		t.Fatalf("%+v, %v", named, err)
	}
	empty, err := Read("defaults.yaml", nil)
	if err != nil || empty.Name != "defaults" || len(empty.Settings) != 0 {
		t.Fatalf("an empty policy (the defaults): %+v, %v", empty, err)
	}
}

// A key that is not a setting, or a value it refuses, is refused with the
// file, line and key named.
func TestAPolicyRefusesWhatIsNotASetting(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		want      []string
	}{
		{"unknown key", "savings-floor: 0.2\ndata-dir: /tmp\n", []string{"a.yaml", "line 2", `"data-dir" is not a server setting`, "max-removals, min-lifetime, savings-floor"}},
		{"bad value", "min-lifetime: soon\n", []string{"line 1", "min-lifetime", "soon"}},
		{"twice", "max-removals: 1\nmax-removals: 2\n", []string{"line 2", "set twice", "line 1"}},
		{"not a mapping", "- savings-floor\n", []string{"want a mapping"}},
		{"a list value", "savings-floor: [0.1, 0.2]\n", []string{"line 1", "want a single value"}},
		{"empty name", "name: ''\n", []string{"the name is empty"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var k knobs
			fs := flagsFor(&k)
			p, err := Read("a.yaml", []byte(tc.doc))
			if err == nil {
				err = p.Apply(fs)
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestTwoPoliciesOfOneNameAreRefused(t *testing.T) {
	a, _ := Read("x/fast.yaml", nil)
	b, _ := Read("y/fast.yml", nil)
	if err := CheckNames([]Policy{a, b}); err == nil || !strings.Contains(err.Error(), `both named "fast"`) {
		t.Fatalf("error %v", err)
	}
}
