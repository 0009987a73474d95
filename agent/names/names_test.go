package names_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"testing"

	"github.com/miekg/dns"

	"github.com/gantry-dev/gantry/agent/names"
	"github.com/gantry-dev/gantry/api"
)

func startServer(t testing.TB) *names.Server {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s := names.New(names.DefaultConfig(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

func query(t *testing.T, s *names.Server, net, name string, qtype uint16) *dns.Msg {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	c := &dns.Client{Net: net}
	resp, _, err := c.Exchange(m, s.Addr())
	if err != nil {
		t.Fatalf("%s %s over %s: %v", dns.TypeToString[qtype], name, net, err)
	}
	return resp
}

func addressesOf(resp *dns.Msg) []string {
	var out []string
	for _, rr := range resp.Answer {
		switch r := rr.(type) {
		case *dns.A:
			out = append(out, r.A.String())
		case *dns.AAAA:
			out = append(out, r.AAAA.String())
		}
	}
	sort.Strings(out)
	return out
}

func webNames(version string, targets ...api.Endpoint) api.ClusterNames {
	return api.ClusterNames{Cluster: "dev", Version: version, Records: []api.NameRecord{
		{Name: "web.dev.gantry.", Targets: targets},
		{Name: "db.dev.gantry.", Targets: []api.Endpoint{}},
	}}
}

// The server answers A, AAAA and SRV from the names it was given, over
// UDP and TCP; a name of the zone it does not know is NXDOMAIN, a name
// outside the zone is refused; new names replace the old at once.
func TestAnswersTheClustersNames(t *testing.T) {
	s := startServer(t)
	s.Set(webNames("v1",
		api.Endpoint{Replica: "web-0", Address: "127.0.0.1", Ports: map[string]int{"http": 20001, "admin": 20002}, Weight: 1, Serving: true},
		api.Endpoint{Replica: "web-1", Address: "::1", Ports: map[string]int{"http": 20003}, Weight: 3, Serving: true}))
	for _, network := range []string{"udp", "tcp"} {
		if got := addressesOf(query(t, s, network, "web.dev.gantry.", dns.TypeA)); len(got) != 1 || got[0] != "127.0.0.1" {
			t.Errorf("A over %s: %v, want [127.0.0.1]", network, got)
		}
	}
	if got := addressesOf(query(t, s, "udp", "WEB.dev.gantry.", dns.TypeAAAA)); len(got) != 1 || got[0] != "::1" {
		t.Errorf("AAAA (any case): %v, want [::1]", got)
	}
	srv := query(t, s, "udp", "web.dev.gantry.", dns.TypeSRV)
	ports := map[uint16]uint16{}
	for _, rr := range srv.Answer {
		r := rr.(*dns.SRV)
		ports[r.Port] = r.Weight
	}
	if len(ports) != 3 || ports[20001] != 1 || ports[20002] != 1 || ports[20003] != 3 {
		t.Errorf("SRV ports and weights %v, want 20001,20002 weight 1 and 20003 weight 3", ports)
	}
	if len(srv.Extra) != 2 {
		t.Errorf("SRV additional records %v, want each target's address", srv.Extra)
	}
	one := query(t, s, "udp", "_http._tcp.web.dev.gantry.", dns.TypeSRV)
	if len(one.Answer) != 2 {
		t.Errorf("SRV of port http: %v, want one per replica", one.Answer)
	}
	if got := addressesOf(query(t, s, "udp", "web-0.web.dev.gantry.", dns.TypeA)); len(got) != 1 || got[0] != "127.0.0.1" {
		t.Errorf("A of a replica: %v", got)
	}
	if resp := query(t, s, "udp", "db.dev.gantry.", dns.TypeA); resp.Rcode != dns.RcodeSuccess || len(resp.Answer) != 0 {
		t.Errorf("a service with nothing serving: rcode %s, %d answers; want NOERROR and none", dns.RcodeToString[resp.Rcode], len(resp.Answer))
	}
	if resp := query(t, s, "udp", "nope.dev.gantry.", dns.TypeA); resp.Rcode != dns.RcodeNameError {
		t.Errorf("unknown name: %s, want NXDOMAIN", dns.RcodeToString[resp.Rcode])
	}
	if resp := query(t, s, "udp", "example.com.", dns.TypeA); resp.Rcode != dns.RcodeRefused {
		t.Errorf("a name outside gantry.: %s, want REFUSED", dns.RcodeToString[resp.Rcode])
	}
	s.Set(webNames("v2", api.Endpoint{Replica: "web-2", Address: "127.0.0.2", Ports: map[string]int{"http": 20005}, Weight: 1, Serving: true}))
	if got := addressesOf(query(t, s, "udp", "web.dev.gantry.", dns.TypeA)); len(got) != 1 || got[0] != "127.0.0.2" {
		t.Errorf("A after the names changed: %v, want [127.0.0.2]", got)
	}
	if s.Version() != "v2" {
		t.Errorf("version %q, want v2", s.Version())
	}
}

// An answer too large for UDP is cut with the TC bit (the client asks
// again over TCP, which answers it whole); a client that offers a larger
// buffer (EDNS0) gets it whole over UDP.
func TestLargeAnswersAreTruncatedOverUDP(t *testing.T) {
	s := startServer(t)
	var targets []api.Endpoint
	for i := range 40 {
		targets = append(targets, api.Endpoint{Replica: fmt.Sprintf("web-%d", i), Address: fmt.Sprintf("127.0.1.%d", i+1),
			Ports: map[string]int{"http": 20000 + i}, Weight: 1, Serving: true})
	}
	s.Set(webNames("v1", targets...))
	udp := query(t, s, "udp", "web.dev.gantry.", dns.TypeSRV)
	if !udp.Truncated || len(udp.Answer) >= 40 {
		t.Errorf("SRV of 40 targets over UDP: truncated %v with %d answers, want TC and fewer", udp.Truncated, len(udp.Answer))
	}
	if tcp := query(t, s, "tcp", "web.dev.gantry.", dns.TypeSRV); tcp.Truncated || len(tcp.Answer) != 40 {
		t.Errorf("over TCP: truncated %v with %d answers, want all 40", tcp.Truncated, len(tcp.Answer))
	}
	m := new(dns.Msg)
	m.SetQuestion("web.dev.gantry.", dns.TypeSRV)
	m.SetEdns0(8192, false)
	resp, _, err := (&dns.Client{UDPSize: 8192}).Exchange(m, s.Addr())
	if err != nil || resp.Truncated || len(resp.Answer) != 40 {
		t.Errorf("with EDNS0 8192: %v, truncated %v, %d answers", err, resp != nil && resp.Truncated, len(resp.Answer))
	}
}
