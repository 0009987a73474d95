// Package names is the agent's DNS server: it answers the names of its
// cluster (<service>.<cluster>.gantry.) from the set the server pushes,
// and refuses every other name (it is not a recursive resolver).
package names

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/gantry-dev/gantry/api"
)

// Config tunes the DNS server.
type Config struct {
	// Listen is the UDP and TCP address ("127.0.0.1:0" picks a port).
	Listen string
	// TTL of every answer: how long a client may keep an address the
	// server has since taken out.
	TTL time.Duration
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{Listen: "127.0.0.1:0", TTL: time.Second}
}

// Server answers a cluster's names.
type Server struct {
	cfg  Config
	log  *slog.Logger
	addr string

	mu      sync.RWMutex
	records map[string][]api.Endpoint // by lower-case fully-qualified name
	version string
}

// New returns a server with no names yet.
func New(cfg Config, log *slog.Logger) *Server {
	return &Server{cfg: cfg, log: log, records: map[string][]api.Endpoint{}}
}

// Start listens on UDP and TCP at the same port and serves until ctx
// ends; it returns once both listen.
func (s *Server) Start(ctx context.Context) error {
	addr, err := s.serve(ctx, s.cfg.Listen)
	if err != nil {
		return err
	}
	s.addr = addr
	return nil
}

// ListenAlso answers the same names at one more address (an overlay
// machine's bridge, where its containers' resolver is) until ctx ends.
func (s *Server) ListenAlso(ctx context.Context, addr string) error {
	_, err := s.serve(ctx, addr)
	return err
}

func (s *Server) serve(ctx context.Context, addr string) (string, error) {
	pc, ln, err := listenBoth(addr)
	if err != nil {
		return "", err
	}
	udp := &dns.Server{PacketConn: pc, Handler: s}
	tcp := &dns.Server{Listener: ln, Handler: s}
	for _, srv := range []*dns.Server{udp, tcp} {
		go func() {
			if err := srv.ActivateAndServe(); err != nil && ctx.Err() == nil {
				s.log.Warn("dns server stopped", "err", err)
			}
		}()
	}
	go func() {
		<-ctx.Done()
		_ = udp.Shutdown()
		_ = tcp.Shutdown()
	}()
	return pc.LocalAddr().String(), nil
}

// anyPortTries is how many free UDP ports are tried, when any port will
// do, before giving up on finding one whose TCP twin is free too.
const anyPortTries = 16

// listenBoth listens on UDP and TCP at one port: the given one, or (port
// 0) a free UDP port whose TCP port is free too.
func listenBoth(addr string) (net.PacketConn, net.Listener, error) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, nil, fmt.Errorf("dns listen address %q: %w", addr, err)
	}
	tries := 1
	if port == "0" {
		tries = anyPortTries
	}
	for i := 1; ; i++ {
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			return nil, nil, fmt.Errorf("dns listen udp %s: %w", addr, err)
		}
		ln, err := net.Listen("tcp", pc.LocalAddr().String())
		if err == nil {
			return pc, ln, nil
		}
		pc.Close()
		if i >= tries {
			return nil, nil, fmt.Errorf("dns listen tcp %s: %w", pc.LocalAddr(), err)
		}
	}
}

// Addr is where the server answers (host:port), once started.
func (s *Server) Addr() string { return s.addr }

// Version is the version of the names last set.
func (s *Server) Version() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.version
}

// Set replaces every name with the cluster's current ones.
func (s *Server) Set(names api.ClusterNames) {
	records := make(map[string][]api.Endpoint, len(names.Records))
	for _, r := range names.Records {
		name := strings.ToLower(dns.Fqdn(r.Name))
		records[name] = append(records[name], r.Targets...)
	}
	s.mu.Lock()
	s.records, s.version = records, names.Version
	s.mu.Unlock()
}

// ServeDNS answers one query.
func (s *Server) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	resp := new(dns.Msg)
	resp.SetReply(req)
	resp.Authoritative = true
	if len(req.Question) != 1 {
		resp.Rcode = dns.RcodeFormatError
		_ = w.WriteMsg(resp)
		return
	}
	q := req.Question[0]
	name := strings.ToLower(q.Name)
	if !dns.IsSubDomain(api.NameDomain, name) {
		resp.Rcode, resp.Authoritative = dns.RcodeRefused, false
		_ = w.WriteMsg(resp)
		return
	}
	s.mu.RLock()
	resp.Rcode = s.answer(resp, q, name)
	s.mu.RUnlock()
	if _, udp := w.LocalAddr().(*net.UDPAddr); udp {
		// An answer larger than the client takes over UDP is cut, with
		// the TC bit: the client asks again over TCP.
		size := dns.MinMsgSize
		if opt := req.IsEdns0(); opt != nil {
			size = max(int(opt.UDPSize()), dns.MinMsgSize)
			resp.SetEdns0(opt.UDPSize(), false)
		}
		resp.Truncate(size)
	}
	_ = w.WriteMsg(resp)
}

// answer fills resp for a name of the zone: A/AAAA of a service's
// serving replicas; SRV of all their ports, or of one port at
// _<port>._tcp.<name>; A/AAAA of one replica at <replica>.<name> (the
// SRV targets).
func (s *Server) answer(resp *dns.Msg, q dns.Question, name string) int {
	if targets, ok := s.records[name]; ok {
		switch q.Qtype {
		case dns.TypeA, dns.TypeAAAA, dns.TypeANY:
			resp.Answer = s.addresses(name, q.Qtype, targets)
		case dns.TypeSRV:
			resp.Answer, resp.Extra = s.services(name, "", targets)
		}
		return dns.RcodeSuccess
	}
	labels := dns.SplitDomainName(name)
	if len(labels) > 2 && strings.HasPrefix(labels[0], "_") && strings.HasPrefix(labels[1], "_") {
		service := dns.Fqdn(strings.Join(labels[2:], "."))
		if targets, ok := s.records[service]; ok {
			if q.Qtype == dns.TypeSRV {
				resp.Answer, resp.Extra = s.services(service, strings.TrimPrefix(labels[0], "_"), targets)
			}
			return dns.RcodeSuccess
		}
	}
	if len(labels) > 1 {
		service := dns.Fqdn(strings.Join(labels[1:], "."))
		for _, t := range s.records[service] {
			if strings.EqualFold(hostLabel(t.Replica), labels[0]) {
				resp.Answer = s.addresses(name, q.Qtype, []api.Endpoint{t})
				return dns.RcodeSuccess
			}
		}
	}
	return dns.RcodeNameError
}

func (s *Server) ttl() uint32 { return uint32(max(s.cfg.TTL/time.Second, 0)) }

func (s *Server) addresses(name string, qtype uint16, targets []api.Endpoint) []dns.RR {
	var out []dns.RR
	for _, t := range targets {
		ip := net.ParseIP(t.Address)
		switch {
		case ip == nil:
		case ip.To4() != nil && qtype != dns.TypeAAAA:
			out = append(out, &dns.A{Hdr: s.header(name, dns.TypeA), A: ip.To4()})
		case ip.To4() == nil && qtype != dns.TypeA:
			out = append(out, &dns.AAAA{Hdr: s.header(name, dns.TypeAAAA), AAAA: ip})
		}
	}
	return out
}

// services are SRV records, one per replica and port (only port, when
// set), each pointing at <replica>.<name>, whose address goes in extra.
func (s *Server) services(name, port string, targets []api.Endpoint) (answer, extra []dns.RR) {
	for _, t := range targets {
		ports := make([]string, 0, len(t.Ports))
		for p := range t.Ports {
			if port == "" || strings.EqualFold(p, port) {
				ports = append(ports, p)
			}
		}
		sort.Strings(ports)
		if len(ports) == 0 {
			continue
		}
		host := dns.Fqdn(hostLabel(t.Replica) + "." + name)
		for _, p := range ports {
			answer = append(answer, &dns.SRV{Hdr: s.header(name, dns.TypeSRV), Priority: 10, Weight: uint16(min(max(t.Weight, 0), 65535)),
				Port: uint16(t.Ports[p]), Target: host})
		}
		extra = append(extra, s.addresses(host, dns.TypeANY, []api.Endpoint{t})...)
	}
	return answer, extra
}

func (s *Server) header(name string, rrtype uint16) dns.RR_Header {
	return dns.RR_Header{Name: name, Rrtype: rrtype, Class: dns.ClassINET, Ttl: s.ttl()}
}

// hostLabel makes a replica id a DNS label.
func hostLabel(replica string) string {
	return strings.ToLower(strings.NewReplacer(".", "-", "_", "-", "@", "-").Replace(replica))
}
