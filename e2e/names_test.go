package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// The README's two-services example: in `gantry dev` (host network
// mode), web's replicas find api's by name through their machine's
// agent ($GANTRY_DNS) and call them; the name answers both api replicas
// over SRV, each with its port; web's exposed port (this run's own, not
// the example's 8080) serves the same through HAProxy.
func TestDevServicesCallEachOtherByName(t *testing.T) {
	t.Parallel() // see parallelTests in helpers_test.go
	needHAProxy(t)
	// As the README runs it: state in a relative .gantry.
	cwd := t.TempDir()
	example, err := os.ReadFile("../examples/two-services.yaml")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(freeTCPPort(t))
	own := strings.Replace(string(example), "- port: 8080", "- port: "+port, 1)
	lines := runDevIn(t, cwd, ".gantry", writeFile(t, t.TempDir(), "two-services.yaml", own))
	nameLine := regexp.MustCompile(`^Name api\.dev\.gantry\. answered at (\S+) `)
	exposedLine := regexp.MustCompile(`^Exposed web \(port http\) at (http://\S+),`)
	var webURLs []string
	resolver, exposed := "", ""
	var transcript strings.Builder
	deadline := time.After(waitLimit)
	for resolver == "" || exposed == "" {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("gantry dev exited early:\n%s", transcript.String())
			}
			transcript.WriteString(line + "\n")
			if strings.HasPrefix(line, "web-") {
				fields := strings.Fields(line)
				webURLs = append(webURLs, fields[len(fields)-1])
			}
			if m := nameLine.FindStringSubmatch(line); m != nil {
				resolver = m[1]
			}
			if m := exposedLine.FindStringSubmatch(line); m != nil {
				exposed = m[1]
			}
		case <-deadline:
			t.Fatalf("no name or exposed port printed:\n%s", transcript.String())
		}
	}
	go func() {
		for range lines { // keep gantry dev's output flowing
		}
	}()
	if len(webURLs) != 2 {
		t.Fatalf("web URLs %v, want 2:\n%s", webURLs, transcript.String())
	}
	waitFor(t, "api's name answering both replicas", func() (bool, string) {
		m := new(dns.Msg)
		m.SetQuestion("_http._tcp.api.dev.gantry.", dns.TypeSRV)
		resp, _, err := (&dns.Client{Timeout: 2 * time.Second}).Exchange(m, resolver)
		if err != nil {
			return false, err.Error()
		}
		if len(resp.Answer) != 2 || len(resp.Extra) != 2 {
			return false, resp.String()
		}
		return true, ""
	})
	if exposed != "http://127.0.0.1:"+port {
		t.Fatalf("exposed at %s, want port %s", exposed, port)
	}
	for _, u := range append(webURLs, exposed) {
		waitFor(t, "web calling api by name from "+u, func() (bool, string) {
			body, ok := get(u + "/call")
			return ok && strings.Contains(body, "called api.dev.gantry.") && strings.Contains(body, "api here"), body
		})
	}
}

// nameClient sends a request every interval to a service found by name,
// as a client with a caching resolver does: the SRV answer is kept for
// its TTL, each request goes to one of its targets.
type nameClient struct {
	resolver, name string
	mu             sync.Mutex
	ok, failed     int
	failures       []string
	cached         []string
	cachedUntil    time.Time
}

func (c *nameClient) targets() []string {
	if time.Now().Before(c.cachedUntil) {
		return c.cached
	}
	m := new(dns.Msg)
	m.SetQuestion(c.name, dns.TypeSRV)
	m.SetEdns0(4096, false)
	resp, _, err := (&dns.Client{Timeout: time.Second, UDPSize: 4096}).Exchange(m, c.resolver)
	if err != nil {
		return c.cached // a resolver that does not answer: keep the last answer
	}
	addrs := map[string]string{}
	for _, rr := range resp.Extra {
		if a, ok := rr.(*dns.A); ok {
			addrs[a.Hdr.Name] = a.A.String()
		}
	}
	var out []string
	ttl := time.Second
	for _, rr := range resp.Answer {
		if srv, ok := rr.(*dns.SRV); ok && addrs[srv.Target] != "" {
			out = append(out, net.JoinHostPort(addrs[srv.Target], strconv.Itoa(int(srv.Port))))
			ttl = min(ttl, time.Duration(srv.Hdr.Ttl)*time.Second)
		}
	}
	c.cached, c.cachedUntil = out, time.Now().Add(ttl)
	return out
}

func (c *nameClient) send() {
	targets := c.targets()
	ok, why := false, "no target"
	if len(targets) > 0 {
		target := targets[rand.IntN(len(targets))]
		body, answered := get("http://" + target + "/")
		ok, why = answered, target+": "+body
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if ok {
		c.ok++
		return
	}
	c.failed++
	if len(c.failures) < 10 {
		c.failures = append(c.failures, time.Now().Format("15:04:05.000")+" "+why)
	}
}

// A client that finds a service by name (an agent's DNS, answers cached
// for their TTL) and sends a request every 10 ms loses none through a
// rolling deployment of 6 replicas, a scale from 6 to 2 and the drain of
// a machine running one of them: a replica (or a moved replica's old
// copy) leaves the name before it stops, and enters it once it serves.
func TestNamesKeepServingThroughDeploymentAndScaleDown(t *testing.T) {
	t.Parallel() // see parallelTests in helpers_test.go
	s := startServer(t, t.TempDir(), "--local-exit-with-server")
	s.apply(t, "v1.yaml", deployment(6, "v1", ""))
	waitFor(t, "6 replicas answering", func() (bool, string) { return allAnswer(s.replicas("web"), 6) })
	var resolver string
	waitFor(t, "a machine answering names", func() (bool, string) {
		machines, err := s.api.ListMachines(context.Background(), "")
		for _, m := range machines {
			if m.DNSAddress != "" {
				resolver = m.DNSAddress
			}
		}
		return resolver != "", fmt.Sprint(err)
	})
	c := &nameClient{resolver: resolver, name: "_http._tcp.web.e2e.gantry."}
	waitFor(t, "the name answering all 6", func() (bool, string) { return len(c.targets()) == 6, fmt.Sprint(c.cached) })
	stop := every(10*time.Millisecond, c.send)
	if out, errOut, code := s.gantry("apply", "--wait", "-f", writeFile(t, s.dataDir, "v2.yaml", deployment(6, "v2", ""))); code != 0 {
		stop()
		t.Fatalf("apply --wait: exit %d\n%s%s", code, out, errOut)
	}
	if out, errOut, code := s.gantry("scale", "service", "web", "--replicas", "2"); code != 0 {
		stop()
		t.Fatalf("scale: exit %d %s%s", code, out, errOut)
	}
	waitFor(t, "2 replicas left", func() (bool, string) {
		rs := s.replicas("web")
		return len(rs) == 2, fmt.Sprintf("%d replicas", len(rs))
	})
	// A drained machine's replica moves, new copy first; its old copy
	// leaves the name once the new one runs, and stops drainSeconds later.
	drained := s.replicas("web")[0].Machine
	if out, errOut, code := s.gantry("drain", drained, "--wait"); code != 0 {
		stop()
		t.Fatalf("drain %s: exit %d %s%s", drained, code, out, errOut)
	}
	stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	t.Logf("%d requests answered, %d failed", c.ok, c.failed)
	if c.failed > 0 || c.ok < 500 {
		t.Fatalf("%d of %d requests failed (want 0 of at least 500): %v", c.failed, c.ok+c.failed, c.failures)
	}
}

// nameSampler asks a resolver for a name's SRV every interval and keeps
// the distinct answers in the order they came (an answer: its targets as
// address:port, sorted, joined by commas; "" for none).
type nameSampler struct {
	mu      sync.Mutex
	answers []string
	samples int
	both    []string // answers with more than one target
}

func startNameSampler(t *testing.T, resolver, name string, interval time.Duration) (*nameSampler, func()) {
	t.Helper()
	ns := &nameSampler{}
	c := &nameClient{resolver: resolver, name: name}
	stop := every(interval, func() {
		c.cachedUntil = time.Time{} // every sample asks the resolver
		targets := c.targets()
		slices.Sort(targets)
		answer := strings.Join(targets, ",")
		ns.mu.Lock()
		defer ns.mu.Unlock()
		ns.samples++
		if len(targets) > 1 {
			ns.both = append(ns.both, answer)
		}
		if n := len(ns.answers); n == 0 || ns.answers[n-1] != answer {
			ns.answers = append(ns.answers, answer)
		}
	})
	return ns, stop
}

// checkFollows: the name never answered two targets, answered from before
// to after, and never answered before again once it had answered after.
func (ns *nameSampler) checkFollows(t *testing.T, before, after string) {
	t.Helper()
	ns.mu.Lock()
	defer ns.mu.Unlock()
	t.Logf("name answers over %d samples: %q", ns.samples, ns.answers)
	if len(ns.both) > 0 {
		t.Errorf("answered several primaries at once, or a replica: %v", ns.both)
	}
	first := slices.Index(ns.answers, after)
	if first < 0 || slices.Index(ns.answers, before) < 0 {
		t.Fatalf("the name never answered %s then %s: %q", before, after, ns.answers)
	}
	if slices.Contains(ns.answers[first:], before) {
		t.Fatalf("the name answered the old primary %s again after the new one %s: %q", before, after, ns.answers)
	}
}
