package scheduler

import (
	"fmt"

	"github.com/gantry-dev/gantry/api"
)

// spreadCheck holds, per spread rule, how many replicas of the service each
// domain (machine or zone) runs, over the machines the replica may use.
type spreadCheck struct {
	rules  []api.SpreadRule
	counts []map[string]int
	mins   []int
}

func newSpreadCheck(eligible []*Machine, r Replica) spreadCheck {
	sc := spreadCheck{rules: r.Spread}
	for _, rule := range r.Spread {
		counts := map[string]int{}
		for _, m := range eligible {
			counts[domain(m, rule.Key)] += m.ServiceCount[r.Service]
		}
		lowest := -1
		for _, n := range counts {
			if lowest < 0 || n < lowest {
				lowest = n
			}
		}
		sc.counts = append(sc.counts, counts)
		sc.mins = append(sc.mins, max(lowest, 0))
	}
	return sc
}

// violation is why placing on m would exceed a rule's maxSkew, or "".
func (sc spreadCheck) violation(m *Machine) string {
	for i, rule := range sc.rules {
		if sc.counts[i][domain(m, rule.Key)]+1-sc.mins[i] > rule.MaxSkew {
			return fmt.Sprintf("%s spread maxSkew %d", rule.Key, rule.MaxSkew)
		}
	}
	return ""
}

func domain(m *Machine, key string) string {
	if key == api.SpreadZone {
		return m.Zone
	}
	return m.ID
}
