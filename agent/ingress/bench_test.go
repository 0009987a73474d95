package ingress

import (
	"context"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
)

// BenchmarkIngressChange measures one change reaching HAProxy while a
// client sends requests through it without pause: a replica swapped
// through the runtime API ("runtime"), and a port added or removed,
// which reloads ("reload"). failed/op counts the client's failed
// requests per change (the target is 0).
func BenchmarkIngressChange(b *testing.B) {
	for _, mode := range []string{"runtime", "reload"} {
		b.Run(mode, func(b *testing.B) {
			if err := New(DefaultConfig("")).Available(); err != nil {
				b.Skip(err)
			}
			cfg := DefaultConfig(b.TempDir())
			cfg.BindAddress, cfg.Room, cfg.StopTimeout = "127.0.0.1", 4, 500*time.Millisecond
			cfg.Log = slog.New(slog.DiscardHandler)
			p := New(cfg)
			if err := p.Available(); err != nil {
				b.Fatal(err)
			}
			defer p.Stop()
			ctx := context.Background()
			port, other := freePort(b), freePort(b)
			a, c := replica(b, "a"), replica(b, "c")
			web := api.IngressRoute{Name: "web", Port: port, Protocol: api.ExposeHTTP, Backends: []api.IngressTarget{a}}
			extra := api.IngressRoute{Name: "admin", Port: other, Protocol: api.ExposeTCP, Backends: []api.IngressTarget{a}}
			if err := p.Apply(ctx, []api.IngressRoute{web}); err != nil {
				b.Fatal(err)
			}
			failed, _, stop := load("http://127.0.0.1:" + strconv.Itoa(port))
			b.ResetTimer()
			for i := range b.N {
				routes := []api.IngressRoute{web}
				switch {
				case mode == "runtime" && i%2 == 0:
					routes[0].Backends = []api.IngressTarget{c}
				case mode == "reload" && i%2 == 0:
					routes = append(routes, extra)
				}
				if err := p.Apply(ctx, routes); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			stop()
			b.ReportMetric(float64(failed.Load())/float64(b.N), "failed/op")
		})
	}
}
