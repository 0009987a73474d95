package loadgen

import (
	"context"
	"errors"
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

// placeServices applies the services a hundred at a time, each batch
// once the servers hold the replicas of the ones before: a fleet that
// grows, rather than one pass making half a million replicas at once.
func placeServices(ctx context.Context, cfg Config, admin *client.Client) (int, error) {
	held := 0
	for first := 0; first < cfg.Services; first += servicesPerApply {
		deadline := time.Now().Add(cfg.PlaceTimeout)
		last := min(first+servicesPerApply, cfg.Services)
		err := retry(ctx, cfg, deadline, func() error {
			_, err := admin.Apply(ctx, servicesSpec(cfg, first, last))
			return err
		})
		if err != nil {
			return held, fmt.Errorf("apply services %d…: %w", first, err)
		}
		if held, err = awaitReplicas(ctx, cfg, admin, last*cfg.ReplicasPerService, deadline); err != nil {
			return held, err
		}
	}
	return held, nil
}

// awaitReplicas waits until the servers hold want replicas of the load's
// cluster.
func awaitReplicas(ctx context.Context, cfg Config, admin *client.Client, want int, deadline time.Time) (int, error) {
	held := 0
	err := retry(ctx, cfg, deadline, func() error {
		_, n, err := admin.ListReplicasWindow(ctx, client.ReplicaQuery{Cluster: cfg.Cluster}, 0, 1)
		if err != nil {
			return fmt.Errorf("count the replicas: %w", err)
		}
		if held = n; n < want {
			return fmt.Errorf("the servers hold %d replicas of %d after %s", n, want, cfg.PlaceTimeout)
		}
		return nil
	})
	return held, err
}

// retry calls fn until it succeeds, every PlaceRetryWait, and returns
// its last error at the deadline. A request the server refused as bad
// (4xx other than 429) is not sent again.
func retry(ctx context.Context, cfg Config, deadline time.Time, fn func() error) error {
	for {
		err := fn()
		var refused *client.APIError
		if err == nil || (errors.As(err, &refused) && refused.Status < 500 && refused.Status != http.StatusTooManyRequests) {
			return err
		}
		if !time.Now().Add(cfg.PlaceRetryWait).Before(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(cfg.PlaceRetryWait):
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
