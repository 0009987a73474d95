package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/gantry-dev/gantry/internal/pki"
)

// TLSConfig is how `gantry server` serves HTTPS. With CertFile and
// KeyFile it serves those; otherwise a CA kept in the store (sealed with
// the encryption key, so every server sharing the store has the same one)
// signs a certificate for this server, kept in DataDir/tls. Either way the
// CA's pin goes into every join token, and agents verify the server
// against it before they send anything.
type TLSConfig struct {
	// Disabled serves plain HTTP (`gantry dev`, on loopback).
	Disabled bool
	// CertFile holds the server certificate and its chain (the last
	// certificate is the one agents pin); KeyFile its private key.
	CertFile string
	KeyFile  string
	// SANs are names and addresses the generated certificate covers
	// besides localhost, the listen address, the advertised URL and the
	// agent server URLs.
	SANs []string
	// CAValidity and CertValidity are the lifetimes of a generated CA and
	// server certificate; a server certificate is issued again at start
	// when it ends within RenewBefore or lacks one of the names.
	CAValidity   time.Duration
	CertValidity time.Duration
	RenewBefore  time.Duration
}

// DefaultTLSConfig is HTTPS with a generated CA.
func DefaultTLSConfig() TLSConfig {
	return TLSConfig{CAValidity: 10 * 365 * 24 * time.Hour, CertValidity: 365 * 24 * time.Hour, RenewBefore: 30 * 24 * time.Hour}
}

// serverTLS is what the server serves and what it trusts.
type serverTLS struct {
	config *tls.Config
	// pin is the CA's hash put in join tokens; caPEM the CA certificate,
	// written to DataDir/ca.crt for the CLI.
	pin   string
	caPEM []byte
}

const caMetaKey = "tls-ca"

// CACertPath is where the CA certificate clients trust is written.
func CACertPath(dataDir string) string { return filepath.Join(dataDir, "ca.crt") }

// prepareTLS sets up HTTPS for the listener, or nothing when disabled.
func (s *Server) prepareTLS(ctx context.Context, listener net.Listener) (*serverTLS, error) {
	cfg := s.cfg.TLS
	if cfg.Disabled {
		return nil, nil
	}
	var chain, key []byte
	var err error
	if cfg.CertFile != "" || cfg.KeyFile != "" {
		chain, key, err = readCertFiles(cfg)
	} else {
		chain, key, err = s.generatedCert(ctx, s.certHosts(listener))
	}
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(chain, key)
	if err != nil {
		return nil, fmt.Errorf("TLS certificate and key: %w", err)
	}
	certs, err := pki.ParseCertificates(chain)
	if err != nil {
		return nil, fmt.Errorf("TLS certificate: %w", err)
	}
	ca := certs[len(certs)-1]
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw})
	if err := os.WriteFile(CACertPath(s.cfg.DataDir), caPEM, 0o600); err != nil {
		return nil, fmt.Errorf("write CA certificate: %w", err)
	}
	return &serverTLS{
		config: &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}, NextProtos: []string{"http/1.1"}},
		pin:    pki.Pin(ca), caPEM: caPEM,
	}, nil
}

func readCertFiles(cfg TLSConfig) (chain, key []byte, err error) {
	if cfg.CertFile == "" || cfg.KeyFile == "" {
		return nil, nil, errors.New("--tls-cert and --tls-key go together")
	}
	if chain, err = os.ReadFile(cfg.CertFile); err != nil {
		return nil, nil, fmt.Errorf("--tls-cert: %w", err)
	}
	if key, err = os.ReadFile(cfg.KeyFile); err != nil {
		return nil, nil, fmt.Errorf("--tls-key: %w", err)
	}
	return chain, key, nil
}

// generatedCert returns this server's certificate followed by the CA's,
// issuing it again when it is missing, ends soon, lacks a host or was
// signed by another CA.
func (s *Server) generatedCert(ctx context.Context, hosts []string) (chain, key []byte, err error) {
	ca, err := s.loadOrCreateCA(ctx)
	if err != nil {
		return nil, nil, err
	}
	dir := filepath.Join(s.cfg.DataDir, "tls")
	certPath, keyPath := filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key")
	now := s.clock.Now()
	current := pki.KeyPair{}
	current.CertPEM, _ = os.ReadFile(certPath)
	current.KeyPEM, _ = os.ReadFile(keyPath)
	if !usableServerCert(current, ca, hosts, now.Add(s.cfg.TLS.RenewBefore)) {
		if current, err = pki.IssueServer(ca, hosts, now, s.cfg.TLS.CertValidity); err != nil {
			return nil, nil, fmt.Errorf("issue server certificate: %w", err)
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, nil, fmt.Errorf("TLS dir: %w", err)
		}
		if err := os.WriteFile(keyPath, current.KeyPEM, 0o600); err != nil {
			return nil, nil, fmt.Errorf("write server key: %w", err)
		}
		if err := os.WriteFile(certPath, current.CertPEM, 0o600); err != nil {
			return nil, nil, fmt.Errorf("write server certificate: %w", err)
		}
		s.log.Info("issued server certificate", "hosts", hosts)
	}
	return slices.Concat(current.CertPEM, ca.CertPEM), current.KeyPEM, nil
}

func usableServerCert(kp, ca pki.KeyPair, hosts []string, until time.Time) bool {
	if _, err := tls.X509KeyPair(kp.CertPEM, kp.KeyPEM); err != nil {
		return false
	}
	certs, err := pki.ParseCertificates(kp.CertPEM)
	if err != nil || !pki.Covers(certs[0], hosts, until) {
		return false
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM)
	_, err = certs[0].Verify(x509.VerifyOptions{Roots: pool, CurrentTime: until.Add(-time.Minute)})
	return err == nil
}

// loadOrCreateCA reads the CA every server of the store shares, creating
// it first if need be.
func (s *Server) loadOrCreateCA(ctx context.Context) (pki.KeyPair, error) {
	var createErr error
	stored, err := s.sealedMetaOrCreate(ctx, caMetaKey, func() string {
		ca, err := pki.NewCA("gantry CA", s.clock.Now(), s.cfg.TLS.CAValidity)
		createErr = err
		data, _ := json.Marshal(ca)
		return string(data)
	})
	if createErr != nil {
		return pki.KeyPair{}, fmt.Errorf("create CA: %w", createErr)
	}
	if err != nil {
		return pki.KeyPair{}, err
	}
	var ca pki.KeyPair
	if err := json.Unmarshal([]byte(stored), &ca); err != nil {
		return pki.KeyPair{}, fmt.Errorf("read CA: %w", err)
	}
	return ca, nil
}

// certHosts are the names a generated certificate covers: localhost, the
// listen address (every interface's when it listens on all), this host's
// name, the advertised and agent server URLs, and the configured SANs.
func (s *Server) certHosts(listener net.Listener) []string {
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	if name, err := os.Hostname(); err == nil {
		hosts = append(hosts, name)
	}
	if addr, ok := listener.Addr().(*net.TCPAddr); ok {
		if addr.IP.IsUnspecified() {
			hosts = append(hosts, interfaceIPs()...)
		} else {
			hosts = append(hosts, addr.IP.String())
		}
	}
	for _, raw := range append([]string{s.cfg.AdvertiseURL, s.cfg.Docker.ServerURL}, s.cfg.AgentServers...) {
		if u, err := url.Parse(raw); err == nil && u.Hostname() != "" {
			hosts = append(hosts, u.Hostname())
		}
	}
	hosts = append(hosts, s.cfg.TLS.SANs...)
	slices.Sort(hosts)
	return slices.Compact(hosts)
}

func interfaceIPs() []string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var ips []string
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			ips = append(ips, n.IP.String())
		}
	}
	return ips
}

// caPin is the pin of the CA agents verify this server with ("" over
// plain HTTP).
func (s *Server) caPin() string {
	if s.tls == nil {
		return ""
	}
	return s.tls.pin
}

// peerTransport reaches other servers of the store (log relay): they
// present certificates of the same CA.
func (s *Server) peerTransport() http.RoundTripper {
	if s.tls == nil {
		return http.DefaultTransport
	}
	return pki.PinnedTransport(s.tls.pin)
}
