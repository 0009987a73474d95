package pki

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
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
