package names_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/gantry-dev/gantry/api"
)

// BenchmarkAnswer measures one query over UDP on loopback to an agent
// holding the names of a cluster of 1,000 services of 10 replicas, and
// reports the answer time's p50 and p99 beside the mean.
//
//	go test ./agent/names -run '^$' -bench Answer -count 6 | benchstat -
func BenchmarkAnswer(b *testing.B) {
	for _, qtype := range []uint16{dns.TypeA, dns.TypeSRV} {
		b.Run(dns.TypeToString[qtype], func(b *testing.B) {
			s := startServer(b)
			names := api.ClusterNames{Cluster: "dev", Version: "v1"}
			for svc := range 1000 {
				rec := api.NameRecord{Name: fmt.Sprintf("svc-%d.dev.gantry.", svc)}
				for i := range 10 {
					rec.Targets = append(rec.Targets, api.Endpoint{Replica: fmt.Sprintf("svc-%d-%d", svc, i), Address: fmt.Sprintf("10.%d.%d.%d", svc/250, svc%250, i+1),
						Ports: map[string]int{"http": 8080}, Weight: 1, Serving: true})
				}
				names.Records = append(names.Records, rec)
			}
			s.Set(names)
			c := &dns.Client{UDPSize: 4096}
			m := new(dns.Msg)
			m.SetQuestion("svc-500.dev.gantry.", qtype)
			m.SetEdns0(4096, false)
			took := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for b.Loop() {
				start := time.Now()
				resp, _, err := c.Exchange(m, s.Addr())
				took = append(took, time.Since(start))
				if err != nil || len(resp.Answer) != 10 {
					b.Fatalf("%v, %d answers", err, len(resp.Answer))
				}
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(took[len(took)*99/100].Microseconds()), "p99-µs")
		})
	}
}
