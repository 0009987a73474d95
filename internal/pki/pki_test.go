package pki

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func mustCA(t *testing.T) KeyPair {
	t.Helper()
	ca, err := NewCA("test CA", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// serve runs an HTTPS server presenting a certificate of ca for hosts,
// followed by the CA, and counts the requests it receives.
func serve(t *testing.T, ca KeyPair, hosts ...string) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	leaf, err := IssueServer(ca, hosts, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(slices.Concat(leaf.CertPEM, ca.CertPEM), leaf.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	var requests atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { requests.Add(1) }))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, &requests
}

func pinOf(t *testing.T, ca KeyPair) string {
	t.Helper()
	certs, err := ParseCertificates(ca.CertPEM)
	if err != nil {
		t.Fatal(err)
	}
	return Pin(certs[0])
}

func pinnedGet(url, pin string) error {
	c := &http.Client{Transport: PinnedTransport(pin)}
	resp, err := c.Get(url)
	if err == nil {
		resp.Body.Close()
	}
	return err
}

func TestPinnedClientReachesTheServerOfItsCA(t *testing.T) {
	ca := mustCA(t)
	srv, requests := serve(t, ca, "127.0.0.1")
	if err := pinnedGet(srv.URL, pinOf(t, ca)); err != nil {
		t.Fatal(err)
	}
	if requests.Load() != 1 {
		t.Fatalf("server saw %d requests, want 1", requests.Load())
	}
}

// A server of another CA, or one whose certificate does not name the
// host dialed, receives nothing.
func TestPinnedClientSendsNothingToAnotherServer(t *testing.T) {
	ca, other := mustCA(t), mustCA(t)
	cases := map[string]struct {
		serverCA KeyPair
		hosts    []string
		want     string
	}{
		"other CA":   {other, []string{"127.0.0.1"}, "no CA with pin"},
		"wrong host": {ca, []string{"gantry.example"}, "127.0.0.1"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			srv, requests := serve(t, c.serverCA, c.hosts...)
			err := pinnedGet(srv.URL, pinOf(t, ca))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error mentioning %q", err, c.want)
			}
			if requests.Load() != 0 {
				t.Fatalf("the server received %d requests", requests.Load())
			}
		})
	}
}

func TestCoversAndValidPin(t *testing.T) {
	ca := mustCA(t)
	leaf, err := IssueServer(ca, []string{"localhost", "10.0.0.7"}, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	certs, _ := ParseCertificates(leaf.CertPEM)
	if !Covers(certs[0], []string{"localhost", "10.0.0.7"}, time.Now()) {
		t.Error("the certificate does not cover its own hosts")
	}
	if Covers(certs[0], []string{"10.0.0.8"}, time.Now()) {
		t.Error("the certificate covers a host it does not name")
	}
	if Covers(certs[0], []string{"localhost"}, time.Now().Add(2*time.Hour)) {
		t.Error("the certificate covers a time after it ends")
	}
	if pin := pinOf(t, ca); !ValidPin(pin) || ValidPin(pin[:20]) || ValidPin("md5:"+pin[7:]) {
		t.Errorf("ValidPin disagrees with Pin's form %q", pin)
	}
}

// connectProxy is an HTTP proxy that tunnels CONNECT requests (as an
// HTTPS proxy on the way to the server does) and counts them.
func connectProxy(t *testing.T) (*url.URL, *atomic.Int32) {
	t.Helper()
	var tunnels atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect {
			http.Error(w, "CONNECT only", http.StatusMethodNotAllowed)
			return
		}
		upstream, err := net.Dial("tcp", r.Host)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		tunnels.Add(1)
		w.WriteHeader(http.StatusOK)
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			upstream.Close()
			return
		}
		go func() { _, _ = io.Copy(upstream, buf); upstream.Close() }()
		_, _ = io.Copy(conn, upstream)
		conn.Close()
	}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	return u, &tunnels
}

func pinnedGetVia(proxy *url.URL, target, pin string) error {
	rt := PinnedTransport(pin)
	rt.(*pinnedTransport).proxy = http.ProxyURL(proxy)
	resp, err := (&http.Client{Transport: rt}).Get(target)
	if err == nil {
		resp.Body.Close()
	}
	return err
}

// Through an HTTPS proxy Go's transport never calls DialTLSContext: the
// pin must be checked in the TLS configuration itself, or the client
// falls back to the system's roots (and trusts any public interceptor).
func TestPinHoldsThroughAConnectProxy(t *testing.T) {
	ca, other := mustCA(t), mustCA(t)
	proxy, tunnels := connectProxy(t)
	srv, requests := serve(t, ca, "127.0.0.1")
	if err := pinnedGetVia(proxy, srv.URL, pinOf(t, ca)); err != nil {
		t.Fatalf("the pinned client did not reach its server through the proxy: %v", err)
	}
	if tunnels.Load() != 1 || requests.Load() != 1 {
		t.Fatalf("tunnels %d, requests %d; want 1 and 1", tunnels.Load(), requests.Load())
	}
	impostor, impostorRequests := serve(t, other, "127.0.0.1")
	err := pinnedGetVia(proxy, impostor.URL, pinOf(t, ca))
	if err == nil || !strings.Contains(err.Error(), "no CA with pin") {
		t.Fatalf("got %v, want a refusal naming the pin", err)
	}
	if impostorRequests.Load() != 0 {
		t.Fatalf("the impostor received %d requests", impostorRequests.Load())
	}
}

func TestPinnedClientRefusesPlainHTTP(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { requests.Add(1) }))
	t.Cleanup(srv.Close)
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/join", strings.NewReader(`{"token":"secret"}`))
	_, err := (&http.Client{Transport: PinnedTransport(pinOf(t, mustCA(t)))}).Do(req)
	if !errors.Is(err, ErrPlainHTTP) {
		t.Fatalf("got %v, want ErrPlainHTTP", err)
	}
	if requests.Load() != 0 {
		t.Fatalf("the plain-HTTP server received %d requests", requests.Load())
	}
}
