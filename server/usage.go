package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gantry-dev/gantry/api"
)

// What replicas use (gantry top) rides the heartbeats and is kept in
// memory only, by the server each machine heartbeats to: it changes all
// the time and is worth nothing after a minute, so it is never written.
// A server asked for it gathers its peers' (the --agent-servers).

// usageCache is the latest usage each machine reported here.
type usageCache struct {
	mu  sync.Mutex
	ttl time.Duration
	by  map[string]api.MachineUsage
}

func newUsageCache(ttl time.Duration) *usageCache {
	return &usageCache{ttl: ttl, by: map[string]api.MachineUsage{}}
}

// record keeps a heartbeat's usage (a heartbeat with none leaves the
// last, which ages out).
func (u *usageCache) record(machine string, usage map[string]api.Usage, now time.Time) {
	if len(usage) == 0 {
		return
	}
	m := api.MachineUsage{Machine: machine, At: now.UTC(), Replicas: usage}
	for _, r := range usage {
		m.Usage.MilliCPU += r.MilliCPU
		m.Usage.MemoryBytes += r.MemoryBytes
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.by[machine] = m
	u.pruneLocked(now)
}

// list is every machine's usage reported within the TTL.
func (u *usageCache) list(now time.Time) []api.MachineUsage {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.pruneLocked(now)
	out := make([]api.MachineUsage, 0, len(u.by))
	for _, m := range u.by {
		out = append(out, m)
	}
	return out
}

func (u *usageCache) pruneLocked(now time.Time) {
	for id, m := range u.by {
		if now.Sub(m.At) > u.ttl {
			delete(u.by, id)
		}
	}
}

// handleUsage answers GET /v1/usage: what each machine and its replicas
// use, from this server and (unless local=true) its peers, the newest
// report of each machine kept.
func (s *Server) handleUsage(w http.ResponseWriter, r *http.Request) {
	now := s.clock.Now()
	merged := map[string]api.MachineUsage{}
	add := func(list []api.MachineUsage) {
		for _, m := range list {
			if have, ok := merged[m.Machine]; !ok || m.At.After(have.At) {
				merged[m.Machine] = m
			}
		}
	}
	add(s.usage.list(now))
	var unreached []string
	if r.URL.Query().Get("local") != "true" {
		for _, peer := range s.cfg.AgentServers {
			if strings.TrimRight(peer, "/") == strings.TrimRight(s.advertise, "/") {
				continue
			}
			list, err := s.peerUsage(r.Context(), peer, r.Header.Get("Authorization"))
			if err != nil {
				unreached = append(unreached, fmt.Sprintf("%s (%v)", peer, err))
				continue
			}
			add(list)
		}
	}
	out := api.UsageReport{Machines: make([]api.MachineUsage, 0, len(merged)), Unreached: unreached}
	for _, m := range merged {
		out.Machines = append(out.Machines, m)
	}
	sort.Slice(out.Machines, func(i, j int) bool { return out.Machines[i].Machine < out.Machines[j].Machine })
	writeJSON(w, http.StatusOK, out)
}

// peerUsage asks another server for what its machines reported to it.
func (s *Server) peerUsage(ctx context.Context, peer, authorization string) ([]api.MachineUsage, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.PeerTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(peer, "/")+"/v1/usage?local=true", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", authorization)
	resp, err := (&http.Client{Transport: s.peerTransport()}).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	var report api.UsageReport
	if err := json.NewDecoder(resp.Body).Decode(&report); err != nil {
		return nil, err
	}
	return slices.Clip(report.Machines), nil
}
