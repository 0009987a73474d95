package server

import (
	"context"
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/store"
)

// HistoryConfig tunes the fleet's history each server keeps in memory for
// the dashboard's charts (GET /v1/history).
type HistoryConfig struct {
	// Interval is how often a sample is taken.
	Interval time.Duration
	// Length is how many samples are kept (the oldest go first).
	Length int
}

// DefaultHistoryConfig keeps six hours, a sample a minute.
func DefaultHistoryConfig() HistoryConfig { return HistoryConfig{Interval: time.Minute, Length: 360} }

// history is the bounded list of samples, oldest first.
type history struct {
	mu      sync.Mutex
	limit   int
	samples []api.HistorySample
	// beats is the heartbeat histogram's cumulative counts at the last
	// sample, to take the next one's from.
	beats []uint64
}

func (h *history) add(sample api.HistorySample) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.samples) >= h.limit {
		h.samples = append(h.samples[:0], h.samples[len(h.samples)-h.limit+1:]...)
	}
	h.samples = append(h.samples, sample)
}

func (h *history) list() []api.HistorySample {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]api.HistorySample(nil), h.samples...)
}

// heartbeatsSince returns how many heartbeats the histogram counted since
// the last call and the bucket bound under which 99% of them fell.
func (h *history) heartbeatsSince(bounds []float64, cumulative []uint64) (uint64, float64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delta := append([]uint64(nil), cumulative...)
	if len(h.beats) == len(cumulative) {
		for i := range delta {
			delta[i] -= h.beats[i]
		}
	}
	h.beats = cumulative
	if len(delta) == 0 {
		return 0, 0
	}
	return delta[len(delta)-1], quantileBound(bounds, delta, 0.99)
}

// quantileBound is the upper bound of the histogram bucket that holds
// quantile q of the observations (cumulative counts per bound, the last
// bound +Inf, which reports as the largest finite bound); 0 with none.
func quantileBound(bounds []float64, cumulative []uint64, q float64) float64 {
	if len(cumulative) == 0 || cumulative[len(cumulative)-1] == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(cumulative[len(cumulative)-1])))
	for i, c := range cumulative {
		if c >= rank {
			if math.IsInf(bounds[i], 1) && i > 0 {
				return bounds[i-1]
			}
			return bounds[i]
		}
	}
	return bounds[len(bounds)-1]
}

// keepHistory samples the fleet every HistoryConfig.Interval until ctx
// ends.
func (s *Server) keepHistory(ctx context.Context) {
	ticker := s.clock.NewTicker(s.cfg.History.Interval)
	defer ticker.Stop()
	for {
		sample, err := s.sampleFleet(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			s.log.Warn("fleet history sample", "err", err)
		} else {
			s.history.add(sample)
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		}
	}
}

// sampleFleet reads what the fleet costs and holds now.
func (s *Server) sampleFleet(ctx context.Context) (api.HistorySample, error) {
	sample := api.HistorySample{At: s.clock.Now().UTC()}
	var machines []*api.Machine
	var services []*api.Service
	var reserved map[string]api.Resources
	err := s.store.View(ctx, func(tx store.Tx) error {
		var err error
		if machines, err = tx.ListMachines(store.MachineFilter{LiveOnly: true}); err != nil {
			return err
		}
		if reserved, err = reservedOf(tx); err != nil {
			return err
		}
		services, err = tx.ListServices()
		return err
	})
	if err == nil {
		err = s.withAllocation(ctx, machines, reserved)
	}
	if err != nil {
		return sample, err
	}
	for _, m := range machines {
		sample.PerHour += m.PricePerHour
		sample.Allocated = sample.Allocated.Add(m.Allocated)
		sample.Allocatable = sample.Allocatable.Add(m.Allocatable)
	}
	for _, svc := range services {
		if svc.Status != nil {
			sample.Pending += svc.Status.Pending
		}
	}
	if plan, err := s.planFromScratch(ctx); err == nil {
		sample.LowerBoundPerHour = plan.bound
	} else if ctx.Err() == nil {
		s.log.Warn("fleet history: no plan for the bound", "err", err)
	}
	sample.Heartbeats, sample.HeartbeatP99Seconds = s.history.heartbeatsSince(s.metrics.HeartbeatCounts())
	return sample, nil
}

// handleHistory answers this server's samples of the fleet.
func (s *Server) handleHistory(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, api.History{Interval: s.cfg.History.Interval.String(), Samples: api.NonNil(s.history.list())})
}
