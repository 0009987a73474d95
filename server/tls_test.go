package server

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/auth"
	"github.com/gantry-dev/gantry/client"
	"github.com/gantry-dev/gantry/internal/pki"
)

// The server serves HTTPS by default; both kinds of join token carry
// the pin of its CA, and a client holding only that pin reaches it.
func TestServerServesHTTPSAndJoinTokensCarryTheCAPin(t *testing.T) {
	ts, ctx := withTestCluster(t, nil)
	if !strings.HasPrefix(ts.URL(), "https://") {
		t.Fatalf("server URL %s is not HTTPS", ts.URL())
	}
	plain := "http://" + strings.TrimPrefix(ts.URL(), "https://")
	if resp, err := http.Get(plain + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("the server answered plain HTTP")
		}
	}
	caPEM, err := os.ReadFile(CACertPath(ts.cfg.DataDir))
	if err != nil {
		t.Fatal(err)
	}
	certs, err := pki.ParseCertificates(caPEM)
	if err != nil {
		t.Fatal(err)
	}
	pin := pki.Pin(certs[0])

	signed, err := ts.admin.CreateJoinToken(ctx, api.JoinTokenRequest{Cluster: "dev", Group: "general"})
	if err != nil {
		t.Fatal(err)
	}
	scoped, err := ts.admin.CreateToken(ctx, api.TokenRequest{Kind: api.TokenJoin, Cluster: "dev", Group: "general"})
	if err != nil {
		t.Fatal(err)
	}
	for name, token := range map[string]string{"signed": signed.Token, "scoped": scoped.Secret} {
		if got := auth.TokenCAPin(token); got != pin {
			t.Errorf("%s join token carries pin %q, want %q", name, got, pin)
		}
	}
	if signed.CACertHash != pin || scoped.CACertHash != pin {
		t.Errorf("responses name pins %q and %q, want %q", signed.CACertHash, scoped.CACertHash, pin)
	}

	agent := client.New(ts.URL(), "", &http.Client{Transport: pki.PinnedTransport(auth.TokenCAPin(scoped.Secret))})
	resp, err := agent.Join(ctx, api.JoinRequest{Token: scoped.Secret, Cluster: "dev", MachineID: "m1",
		Inventory: api.Inventory{Capacity: api.Resources{MilliCPU: 1000, MemoryBytes: 1 << 30}, Runtimes: []string{"process"}}})
	if err != nil {
		t.Fatalf("join over the pinned connection: %v", err)
	}
	if resp.MachineID != "m1" {
		t.Fatalf("joined as %q", resp.MachineID)
	}
}

// The generated certificate is kept across restarts, and issued again
// when the server must answer to a name it does not cover.
func TestServerCertificateIsKeptAndReissuedForNewNames(t *testing.T) {
	dir := t.TempDir()
	first := startServer(t, func(c *Config) { c.DataDir, c.Store.SQLite = dir, DefaultConfig(dir).Store.SQLite })
	certPath := filepath.Join(dir, "tls", "server.crt")
	original, err := os.ReadFile(certPath)
	if err != nil {
		t.Fatal(err)
	}
	caBefore, _ := os.ReadFile(CACertPath(dir))
	first.stopNow(t)
	first.Close()

	restart := func(sans ...string) []byte {
		t.Helper()
		ts := startServer(t, func(c *Config) {
			c.DataDir, c.Store.SQLite, c.TLS.SANs = dir, DefaultConfig(dir).Store.SQLite, sans
		})
		if _, err := ts.admin.ListClusters(context.Background()); err != nil {
			t.Fatal(err)
		}
		ts.stopNow(t)
		ts.Close()
		data, err := os.ReadFile(certPath)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	if kept := restart(); !slices.Equal(kept, original) {
		t.Error("a restart issued a new certificate for the same names")
	}
	reissued := restart("gantry.example.internal")
	certs, err := pki.ParseCertificates(reissued)
	if err != nil {
		t.Fatal(err)
	}
	if !pki.Covers(certs[0], []string{"gantry.example.internal", "127.0.0.1"}, time.Now()) {
		t.Errorf("the certificate covers %v %v, not the new name", certs[0].DNSNames, certs[0].IPAddresses)
	}
	if caAfter, _ := os.ReadFile(CACertPath(dir)); !slices.Equal(caAfter, caBefore) {
		t.Error("the CA changed across restarts: every agent's pin would break")
	}
}

// With --tls-cert and --tls-key the server serves them, and the pin is
// the last certificate of the chain.
func TestServerServesGivenCertificate(t *testing.T) {
	ca, err := pki.NewCA("operator CA", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := pki.IssueServer(ca, []string{"127.0.0.1"}, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "server.pem"), filepath.Join(dir, "server.key")
	if err := os.WriteFile(certFile, slices.Concat(leaf.CertPEM, ca.CertPEM), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, leaf.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	ts, ctx := withTestCluster(t, func(c *Config) { c.TLS.CertFile, c.TLS.KeyFile = certFile, keyFile })
	token, err := ts.admin.CreateJoinToken(ctx, api.JoinTokenRequest{Cluster: "dev", Group: "general"})
	if err != nil {
		t.Fatal(err)
	}
	caCerts, _ := pki.ParseCertificates(ca.CertPEM)
	if got := auth.TokenCAPin(token.Token); got != pki.Pin(caCerts[0]) {
		t.Fatalf("the token pins %q, want the operator CA's %q", got, pki.Pin(caCerts[0]))
	}
	if _, err := os.Stat(filepath.Join(ts.cfg.DataDir, "tls")); !os.IsNotExist(err) {
		t.Errorf("a certificate was generated although one was given: %v", err)
	}
}
