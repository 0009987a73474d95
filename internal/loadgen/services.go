package loadgen

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/client"
)

// placement is how the services' replicas came to be.
type placement struct {
	replicas int
	took     time.Duration
	err      error
}

// servicesPerApply is how many services one apply carries.
const servicesPerApply = 100

// startServices applies the load's services and waits until the servers
// hold all their replicas; the channel (buffered) gets the outcome. It
// is nil when the load has no services.
func startServices(ctx context.Context, cfg Config, httpClient *http.Client) chan placement {
	if cfg.Services <= 0 || cfg.ReplicasPerService <= 0 {
		return nil
	}
	out := make(chan placement, 1)
	go func() {
		start := time.Now()
		n, err := placeServices(ctx, cfg, client.New(cfg.Servers, cfg.AdminToken, httpClient))
		out <- placement{replicas: n, took: time.Since(start), err: err}
	}()
	return out
}

func placeServices(ctx context.Context, cfg Config, admin *client.Client) (int, error) {
	for first := 0; first < cfg.Services; first += servicesPerApply {
		if _, err := admin.Apply(ctx, servicesSpec(cfg, first, min(first+servicesPerApply, cfg.Services))); err != nil {
			return 0, fmt.Errorf("apply services %d…: %w", first, err)
		}
	}
	want := cfg.Services * cfg.ReplicasPerService
	deadline := time.Now().Add(cfg.PlaceTimeout)
	for {
		_, held, err := admin.ListReplicasWindow(ctx, client.ReplicaQuery{Cluster: cfg.Cluster}, 0, 1)
		if err != nil {
			return 0, fmt.Errorf("count the replicas: %w", err)
		}
		if held >= want {
			return held, nil
		}
		if time.Now().After(deadline) {
			return held, fmt.Errorf("the servers hold %d replicas of %d after %s", held, want, cfg.PlaceTimeout)
		}
		select {
		case <-ctx.Done():
			return held, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// servicesSpec is the services [first, last) of the load, as one file.
func servicesSpec(cfg Config, first, last int) []byte {
	var b strings.Builder
	for i := first; i < last; i++ {
		fmt.Fprintf(&b, "---\nkind: Service\nmetadata: {name: %s-svc-%05d}\nspec:\n  cluster: %s\n  command: [sleep, \"86400\"]\n  replicas: %d\n  resources: {cpu: 10m, memory: 16Mi}\n",
			cfg.Cluster, i, cfg.Cluster, cfg.ReplicasPerService)
	}
	return []byte(b.String())
}
