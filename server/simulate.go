package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/sim"
	"github.com/gantry-dev/gantry/sim/policy"
	"github.com/gantry-dev/gantry/sim/report"
	"github.com/gantry-dev/gantry/sim/trace"
	"github.com/gantry-dev/gantry/store"
)

// SimulateConfig bounds what the server keeps and spends for the
// simulations its API and dashboard run (`gantry simulate` on the stored
// spec and a stored trace).
type SimulateConfig struct {
	// MaxTraceBytes is the largest trace kept; MaxTraces how many are.
	MaxTraceBytes int64
	MaxTraces     int
	// MaxSpan is the longest a trace may last (first row to last).
	MaxSpan time.Duration
	// MaxPolicies is how many policies one simulation compares.
	MaxPolicies int
	// Timeout is the longest a simulation runs before it is given up.
	// One runs at a time: another asked meanwhile is refused (429).
	Timeout time.Duration
}

// DefaultSimulateConfig returns the defaults.
func DefaultSimulateConfig() SimulateConfig {
	return SimulateConfig{MaxTraceBytes: 4 << 20, MaxTraces: 50, MaxSpan: 31 * 24 * time.Hour, MaxPolicies: 4, Timeout: 2 * time.Minute}
}

func (c SimulateConfig) check() error {
	if c.MaxTraceBytes < 1 || c.MaxTraces < 1 || c.MaxSpan <= 0 || c.MaxPolicies < 1 || c.Timeout <= 0 {
		return fmt.Errorf("simulate: max trace bytes, max traces, max trace span, max policies and timeout must be positive (got %+v)", c)
	}
	return nil
}

// traceKeyPrefix is where the traces are kept among the store's meta
// values, each the JSON of a storedTrace.
const traceKeyPrefix = "trace/"

var traceNameRe = regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$`)

type storedTrace struct {
	Trace api.Trace `json:"trace"`
	CSV   string    `json:"csv"`
}

// handlePutTrace keeps a trace (its CSV is the body), checked as
// `gantry simulate` checks one, against the stored services.
func (s *Server) handlePutTrace(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if !traceNameRe.MatchString(name) {
		s.writeError(w, r, errorf(http.StatusBadRequest, "invalid", "name", "trace name %q: want lower-case letters, digits, '.', '_' or '-', at most 63", name))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.Simulate.MaxTraceBytes))
	if err != nil {
		s.writeError(w, r, errorf(http.StatusRequestEntityTooLarge, "too-large", "", "trace %s: larger than the server keeps (--max-trace-bytes %d) or unreadable: %v", name, s.cfg.Simulate.MaxTraceBytes, err))
		return
	}
	var kept api.Trace
	err = s.store.Update(r.Context(), func(tx store.Tx) error {
		services, err := tx.ListServices()
		if err != nil {
			return err
		}
		tr, err := s.readTrace(name, body, services)
		if err != nil {
			return err
		}
		if err := s.roomForTrace(tx, name); err != nil {
			return err
		}
		kept = api.Trace{Name: name, Rows: len(tr.Rows), Services: tr.Services(), Start: tr.Start(), End: tr.End(), Bytes: len(body), CreatedAt: s.clock.Now().UTC()}
		data, err := json.Marshal(storedTrace{Trace: kept, CSV: string(body)})
		if err != nil {
			return err
		}
		if err := tx.PutMeta(traceKeyPrefix+name, string(data)); err != nil {
			return err
		}
		return store.Record(tx, s.clock.Now(), api.EventNormal, "TraceStored", api.KindTrace, name, "trace of %d rows kept for simulations", kept.Rows)
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, kept)
}

// readTrace reads a trace's CSV, naming its rows the spec's services
// refuse, and refuses one longer than MaxSpan.
func (s *Server) readTrace(name string, body []byte, services []*api.Service) (trace.Trace, error) {
	tr, err := trace.ReadCSV(bytes.NewReader(body), trace.Names(services))
	if err != nil {
		return trace.Trace{}, errorf(http.StatusUnprocessableEntity, "invalid", "trace", "trace %s: %v", name, err)
	}
	if span := tr.End().Sub(tr.Start()); span > s.cfg.Simulate.MaxSpan {
		return trace.Trace{}, errorf(http.StatusUnprocessableEntity, "invalid", "trace", "trace %s lasts %s: the server simulates at most %s (--max-trace-span)", name, span, s.cfg.Simulate.MaxSpan)
	}
	return tr, nil
}

// roomForTrace refuses a new trace once MaxTraces are kept.
func (s *Server) roomForTrace(tx store.Tx, name string) error {
	kept, err := tx.ListMetaPrefix(traceKeyPrefix)
	if err != nil {
		return err
	}
	if _, replaced := kept[traceKeyPrefix+name]; !replaced && len(kept) >= s.cfg.Simulate.MaxTraces {
		return errorf(http.StatusConflict, "too-many", "", "the server keeps %d traces already (--max-traces): delete one first", len(kept))
	}
	return nil
}

func (s *Server) handleListTraces(w http.ResponseWriter, r *http.Request) {
	var out []api.Trace
	err := s.store.View(r.Context(), func(tx store.Tx) error {
		kept, err := tx.ListMetaPrefix(traceKeyPrefix)
		if err != nil {
			return err
		}
		out = make([]api.Trace, 0, len(kept))
		for key, value := range kept {
			st, err := decodeTrace(key, value)
			if err != nil {
				return err
			}
			out = append(out, st.Trace)
		}
		return nil
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	writeJSON(w, http.StatusOK, list[api.Trace]{Items: out})
}

// handleGetTrace answers a trace's CSV.
func (s *Server) handleGetTrace(w http.ResponseWriter, r *http.Request) {
	st, err := s.storedTrace(r.Context(), r.PathValue("name"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	_, _ = io.WriteString(w, st.CSV)
}

func (s *Server) handleDeleteTrace(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	err := s.store.Update(r.Context(), func(tx store.Tx) error {
		if _, err := tx.GetMeta(traceKeyPrefix + name); err != nil {
			return fmt.Errorf("trace %s: %w", name, store.ErrNotFound)
		}
		if err := tx.DeleteMeta(traceKeyPrefix + name); err != nil {
			return err
		}
		return store.Record(tx, s.clock.Now(), api.EventNormal, "TraceDeleted", api.KindTrace, name, "trace deleted")
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"deleted": "trace/" + name})
}

func (s *Server) storedTrace(ctx context.Context, name string) (storedTrace, error) {
	var st storedTrace
	err := s.store.View(ctx, func(tx store.Tx) error {
		value, err := tx.GetMeta(traceKeyPrefix + name)
		if err != nil {
			return fmt.Errorf("trace %s: %w", name, store.ErrNotFound)
		}
		st, err = decodeTrace(traceKeyPrefix+name, value)
		return err
	})
	return st, err
}

func decodeTrace(key, value string) (storedTrace, error) {
	var st storedTrace
	if err := json.Unmarshal([]byte(value), &st); err != nil {
		return storedTrace{}, fmt.Errorf("stored %s: %w", key, err)
	}
	return st, nil
}

// handleSimulate runs a stored trace through the control loop on the
// stored spec, once per policy, over this server's own settings; nothing
// is written. One simulation runs at a time, for at most Timeout.
func (s *Server) handleSimulate(w http.ResponseWriter, r *http.Request) {
	var req api.SimulationRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	select {
	case s.simulating <- struct{}{}:
		defer func() { <-s.simulating }()
	default:
		w.Header().Set("Retry-After", "5")
		s.writeError(w, r, errorf(http.StatusTooManyRequests, "busy", "", "a simulation runs on this server already: try again when it ends"))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.Simulate.Timeout)
	defer cancel()
	setup, policies, leftOut, err := s.simulation(ctx, req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	results, err := sim.SimulateAll(ctx, setup, policies, nil)
	if errors.Is(err, context.DeadlineExceeded) {
		err = errorf(http.StatusRequestTimeout, "timeout", "", "the simulation took longer than the server allows (--simulate-timeout %s): %v", s.cfg.Simulate.Timeout, err)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var plot strings.Builder
	if err := report.Plot(&plot, results); err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, report.Simulation{Results: results, Plot: plot.String(), LeftOut: leftOut})
}

// simulation is the request's setup and policies, every part checked.
func (s *Server) simulation(ctx context.Context, req api.SimulationRequest) (sim.Setup, []sim.Policy, []string, error) {
	if len(req.Policies) > s.cfg.Simulate.MaxPolicies {
		return sim.Setup{}, nil, nil, errorf(http.StatusBadRequest, "invalid", "policies", "%d policies: the server compares at most %d (--max-simulation-policies)", len(req.Policies), s.cfg.Simulate.MaxPolicies)
	}
	policies, err := s.simulationPolicies(req.Policies)
	if err != nil {
		return sim.Setup{}, nil, nil, err
	}
	if req.Trace == "" {
		return sim.Setup{}, nil, nil, errorf(http.StatusBadRequest, "invalid", "trace", "trace: name a stored trace")
	}
	st, err := s.storedTrace(ctx, req.Trace)
	if err != nil {
		return sim.Setup{}, nil, nil, err
	}
	declared, err := s.ctrl.Declared(ctx)
	if err != nil {
		return sim.Setup{}, nil, nil, err
	}
	setup := sim.Setup{Catalogs: declared.Catalogs, Providers: declared.Providers, Seed: max(req.Seed, 1)}
	var leftOut []string
	for _, g := range declared.FailoverGroups {
		leftOut = append(leftOut, "failover group "+g.Metadata.Name)
	}
	for _, cl := range declared.Clusters {
		if cl.Kubernetes() {
			leftOut = append(leftOut, "Kubernetes cluster "+cl.Metadata.Name)
			continue
		}
		setup.Clusters = append(setup.Clusters, cl)
	}
	slices.SortFunc(setup.Clusters, func(a, b *api.Cluster) int { return strings.Compare(a.Metadata.Name, b.Metadata.Name) })
	setup.World, setup.WorldName = sim.WorldFor(setup.Clusters)
	if req.World != "" {
		if setup.World, err = sim.ReadWorld(setup.World, "world", []byte(req.World)); err != nil {
			return sim.Setup{}, nil, nil, errorf(http.StatusBadRequest, "invalid", "world", "%v", err)
		}
		setup.WorldName = "the request's over " + setup.WorldName
	}
	for _, svc := range declared.Services {
		cl := declared.Clusters[svc.Spec.Cluster]
		if svc.Spec.Failover != nil || cl == nil || cl.Kubernetes() {
			leftOut = append(leftOut, "service "+svc.Metadata.Name)
			continue
		}
		setup.Services = append(setup.Services, svc)
	}
	slices.Sort(leftOut)
	if setup.Trace, err = s.readTrace(req.Trace, []byte(st.CSV), setup.Services); err != nil {
		return sim.Setup{}, nil, nil, err
	}
	if err := setup.Check(); err != nil {
		return sim.Setup{}, nil, nil, errorf(http.StatusUnprocessableEntity, "invalid", "", "the stored spec cannot be simulated: %v", err)
	}
	return setup, policies, leftOut, nil
}

// simulationPolicies resolves the request's policies over this server's
// settings; none is those settings.
func (s *Server) simulationPolicies(in []api.SimulationPolicy) ([]sim.Policy, error) {
	const over = "this server's settings"
	base := s.ctrl.DecideConfig()
	if len(in) == 0 {
		return []sim.Policy{{Name: "this server", Config: base, Over: over}}, nil
	}
	read := make([]policy.Policy, 0, len(in))
	for i, p := range in {
		if p.Name == "" {
			return nil, errorf(http.StatusBadRequest, "invalid", fmt.Sprintf("policies[%d].name", i), "policies[%d].name: name the policy", i)
		}
		pol := policy.Policy{Name: p.Name, File: fmt.Sprintf("policies[%d]", i)}
		for _, key := range slices.Sorted(maps.Keys(p.Settings)) {
			pol.Settings = append(pol.Settings, policy.Setting{Key: key, Value: p.Settings[key]})
		}
		read = append(read, pol)
	}
	if err := policy.CheckNames(read); err != nil {
		return nil, errorf(http.StatusBadRequest, "invalid", "policies", "%v", err)
	}
	out := make([]sim.Policy, 0, len(read))
	for _, p := range read {
		sp, err := policy.Resolve(p, base)
		if err != nil {
			return nil, errorf(http.StatusBadRequest, "invalid", p.File+".settings", "%v", err)
		}
		sp.Over = over
		out = append(out, sp)
	}
	return out, nil
}
