package agent

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/agent/ingress"
	"github.com/gantry-dev/gantry/api"
)

// routesServed are the exposed ports this machine serves: all of the
// cluster's on an edge machine, none elsewhere.
func (a *Agent) routesServed(n api.ClusterNames) []api.IngressRoute {
	if !n.Serves(a.cfg.Group) {
		return nil
	}
	return n.Ingress
}

// serveIngress has HAProxy serve the latest routes; a failed change is
// tried again after RetryInterval (HAProxy keeps serving the last one
// it took). HAProxy stops with the agent.
func (a *Agent) serveIngress(ctx context.Context) {
	cfg := a.cfg.Ingress
	if cfg.Dir == "" {
		cfg.Dir = filepath.Join(a.cfg.DataDir, "ingress")
	}
	cfg.Log = a.log.With("component", "ingress")
	proxy := ingress.New(cfg)
	defer proxy.Stop()
	var pending []api.IngressRoute
	retry := (<-chan time.Time)(nil)
	missing := false
	for {
		select {
		case <-ctx.Done():
			return
		case pending = <-a.routes:
		case <-retry:
		}
		retry = nil
		if len(pending) > 0 {
			if err := proxy.Available(); err != nil {
				if !missing {
					a.log.Error("cannot serve the cluster's exposed ports", "err", err)
				}
				missing = true
				a.setCondition(api.ConditionIngressReady, false, "HAProxyMissing", err.Error())
				continue
			}
		}
		err := proxy.Apply(ctx, pending)
		switch {
		case ctx.Err() != nil:
		case err != nil:
			a.log.Error("exposed ports not served as wanted; trying again", "err", err)
			a.setCondition(api.ConditionIngressReady, false, "ProxyFailed", lastLine(err.Error(), maxConditionMessage))
			retry = time.After(a.cfg.RetryInterval)
		case len(pending) == 0:
			a.clearCondition(api.ConditionIngressReady)
		default:
			a.setCondition(api.ConditionIngressReady, true, "Serving", "HAProxy serves port(s) "+portList(pending))
		}
	}
}

// maxConditionMessage bounds a condition's message (HAProxy's errors
// carry its whole output).
const maxConditionMessage = 400

// lastLine keeps the end of s, at most n bytes.
func lastLine(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

func portList(routes []api.IngressRoute) string {
	ports := make([]string, 0, len(routes))
	for _, r := range routes {
		ports = append(ports, strconv.Itoa(r.Port))
	}
	return strings.Join(ports, ", ")
}
