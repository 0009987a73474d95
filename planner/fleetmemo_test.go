package planner

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// A look that takes the last look's records of the machines not noted
// since (Input.MachineIDs) finds what a walk of every machine finds, and
// plans the same: fleets changed round after round (replicas gone and
// come, prices changed, machines made, ended, joined, kept from
// disruption), the clock moved on (machines age, empty ones settle), the
// catalog changed now and then (an offering unavailable for a while),
// and the scratch cleared now and then.
func TestALookFromTheLastLooksRecordsFindsWhatAWalkFinds(t *testing.T) {
	rng := seededRand(t, 11)
	var shared Scratch
	reads, machines, resets, kept, partly := 0, 0, 0, 0, 0
	for fleet := range 200 {
		in, cfg := randomSettledFleet(rng)
		shared.ForgetMachines()
		for round := range 12 {
			if round > 0 {
				in.Machines = changeFleet(rng, in, &shared, fmt.Sprintf("f%dr%d", fleet, round))
				in.Now = in.Now.Add(time.Duration(rng.IntN(600)) * time.Second)
			}
			cleared := round == 0
			switch rng.IntN(10) {
			case 0:
				in.Unavailable = Unavailable{OfferingKey(in.Groups[0].Types[0].Name, "a", "onDemand"): in.Now.Add(time.Minute)}
			case 1:
				in.Unavailable = nil
			case 2:
				shared.Clear()
				resets, cleared = resets+1, true
			}
			in.Scratch, in.MachinesByID, in.MachineIDs = &shared, true, idsOf(in.Machines)
			plan, p := computeKept(cfg, in, false)
			walked := in
			walked.Scratch, walked.MachineIDs = nil, nil
			want, q := computeKept(cfg, walked, false)
			if !reflect.DeepEqual(plan, want) {
				t.Fatalf("fleet %d round %d: from the records\n%+v\nwalking every machine\n%+v", fleet, round, plan, want)
			}
			if p.walk.memo == nil {
				t.Fatalf("fleet %d round %d: the look did not take the records", fleet, round)
			}
			if why := walksDiffer(p, p.walk, q.walk); why != "" {
				t.Fatalf("fleet %d round %d: %s", fleet, round, why)
			}
			reads, machines = reads+shared.MemoReads(), machines+len(in.Machines)
			if !cleared {
				kept++
				if shared.MemoReads() < len(in.Machines) {
					partly++
				}
			}
		}
	}
	if partly*2 < kept {
		t.Fatalf("of %d looks after one in the same scratch, %d read fewer than every machine: the records were hardly taken", kept, partly)
	}
	t.Logf("the looks read %d of %d machines; %d of %d looks after one in the same scratch read fewer than all (%d scratches cleared)", reads, machines, partly, kept, resets)
}

func idsOf(ms []*Machine) []string {
	ids := make([]string, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
	}
	return ids
}

// changeFleet changes a few machines of in in place, ends some and
// makes some (suffix names them), noting each in s as a pass would
// (new ones only now and then: the records hold none of them), and
// returns the machines by id.
func changeFleet(rng *rand.Rand, in Input, s *Scratch, suffix string) []*Machine {
	ms := slices.Clone(in.Machines)
	for range rng.IntN(4) {
		if len(ms) == 0 {
			break
		}
		m := ms[rng.IntN(len(ms))]
		switch rng.IntN(5) {
		case 0:
			if n := len(m.Replicas); n > 0 {
				m.Machine = m.Machine.Clone()
				unassignLast(m)
				if n == 1 {
					m.IdleSince = in.Now
				}
			}
		case 1:
			m.Machine = m.Machine.Clone()
			m.PricePerHour *= []float64{0.5, 2}[rng.IntN(2)]
		case 2:
			m.DoNotDisrupt = !m.DoNotDisrupt
		case 3:
			m.Joined = !m.Joined
		case 4:
			m.CreatedAt = in.Now.Add(-time.Duration(rng.IntN(1200)) * time.Second)
		}
		s.NoteMachineChanged(m.ID)
	}
	if rng.IntN(3) == 0 && len(ms) > 1 {
		k := rng.IntN(len(ms))
		ms = slices.Delete(ms, k, k+1)
	}
	if rng.IntN(3) == 0 {
		g := in.Groups[rng.IntN(len(in.Groups))]
		it := g.Types[rng.IntN(len(g.Types))]
		var rs []*Machine
		if rng.IntN(2) == 0 {
			rs = []*Machine{joined(g.ID+"-m0"+suffix, g.ID, it, time.Duration(rng.IntN(1200))*time.Second, replicas(g.ID+suffix, 1+rng.IntN(2), 250)...)}
		} else {
			rs = []*Machine{joined(g.ID+"-m1"+suffix, g.ID, it, 0)}
			rs[0].Joined = rng.IntN(2) == 0
		}
		ms = append(ms, rs...)
		if rng.IntN(2) == 0 {
			s.NoteMachineChanged(rs[0].ID)
		}
	}
	slices.SortFunc(ms, func(a, b *Machine) int { return strings.Compare(a.ID, b.ID) })
	return ms
}

// unassignLast takes the machine's last replica off it.
func unassignLast(m *Machine) {
	n := len(m.Replicas)
	r := m.Replicas[n-1]
	m.Replicas = slices.Clip(m.Replicas[:n-1])
	m.Allocated = m.Allocated.Sub(r.Requests)
	if m.ServiceCount != nil {
		m.ServiceCount = map[string]int{}
		for _, o := range m.Replicas {
			m.ServiceCount[o.Service]++
		}
	}
}
