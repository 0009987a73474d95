package agent

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/auth"
	"github.com/gantry-dev/gantry/internal/pki"
	"github.com/gantry-dev/gantry/runtime/process"
)

// handshakeErrors reports the TLS handshakes a test server refused.
type handshakeErrors chan string

func (h handshakeErrors) Write(p []byte) (int, error) {
	if strings.Contains(string(p), "TLS handshake error") {
		select {
		case h <- string(p):
		default:
		}
	}
	return len(p), nil
}

func pinnedAgent(t *testing.T, serverURL, pin string) (*Agent, string) {
	t.Helper()
	signer, err := auth.NewSigner([]byte(auth.NewKey()))
	if err != nil {
		t.Fatal(err)
	}
	token, err := signer.WithCAPin(pin).Mint(auth.JoinClaims{Cluster: "c", ExpiresAt: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.ServerURL, cfg.Cluster, cfg.DataDir, cfg.JoinToken, cfg.RetryInterval = serverURL, "c", dir, token, time.Hour
	return New(cfg, process.New(process.Config{Dir: filepath.Join(dir, "replicas")}), slog.New(slog.NewTextHandler(io.Discard, nil))), dir
}

// The agent verifies an HTTPS server against the pin its join token
// carries, joins, and keeps the pin with its credential.
func TestAgentJoinsTheServerItsTokenPins(t *testing.T) {
	fs := &fakeServer{}
	srv := httptest.NewTLSServer(fs.handler(t))
	t.Cleanup(srv.Close)
	pin := pki.Pin(srv.Certificate())
	a, dir := pinnedAgent(t, srv.URL, pin)
	if err := a.ensureCredential(context.Background()); err != nil {
		t.Fatal(err)
	}
	var cf credentialFile
	if err := json.Unmarshal([]byte(readFile(filepath.Join(dir, "credential.json"))), &cf); err != nil || cf.CACertHash != pin {
		t.Fatalf("credential file keeps pin %q (%v), want %q", cf.CACertHash, err, pin)
	}
	restarted := New(Config{DataDir: dir, ServerURL: srv.URL}, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if restarted.cfg.CACertHash != pin {
		t.Fatalf("a restarted agent verifies with %q, want the kept pin", restarted.cfg.CACertHash)
	}
}

// A server whose certificate does not chain to the pinned CA receives
// nothing: not the join token, not a request.
func TestAgentSendsNothingToAnotherServer(t *testing.T) {
	fs := &fakeServer{}
	srv := httptest.NewUnstartedServer(fs.handler(t))
	refused := make(handshakeErrors, 1)
	srv.Config.ErrorLog = log.New(refused, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	other, err := pki.NewCA("another CA", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	certs, _ := pki.ParseCertificates(other.CertPEM)
	a, _ := pinnedAgent(t, srv.URL, pki.Pin(certs[0]))
	ctx, cancel := context.WithCancel(context.Background())
	joined := make(chan error, 1)
	go func() { joined <- a.ensureCredential(ctx) }()
	select {
	case <-refused:
	case err := <-joined:
		t.Fatalf("the agent joined a server its pin does not name: %v", err)
	}
	cancel()
	<-joined
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.joined.Token != "" {
		t.Fatal("the server received the join token")
	}
}

// A pinned agent pointed at plain http:// refuses to start: the token
// would cross the network in the clear, pin or not.
func TestPinnedAgentRefusesPlainHTTP(t *testing.T) {
	fs := &fakeServer{}
	srv := httptest.NewServer(fs.handler(t))
	t.Cleanup(srv.Close)
	ca, err := pki.NewCA("a CA", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	certs, _ := pki.ParseCertificates(ca.CertPEM)
	a, _ := pinnedAgent(t, srv.URL, pki.Pin(certs[0]))
	err = a.Run(context.Background())
	if !errors.Is(err, pki.ErrPlainHTTP) || !strings.Contains(err.Error(), srv.URL) {
		t.Fatalf("got %v, want ErrPlainHTTP naming %s", err, srv.URL)
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.joined.Token != "" {
		t.Fatal("the server received the join token over plain HTTP")
	}
}
