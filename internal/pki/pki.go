// Package pki is Gantry's small certificate authority: a CA and the
// servers' certificates it signs, the CA's pin (a hash of its public key,
// kubeadm's discovery hash) and the TLS settings that verify a server
// against that pin before anything is sent.
package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// PinPrefix starts every pin: "sha256:" and the hex digest of the CA
// certificate's SubjectPublicKeyInfo.
const PinPrefix = "sha256:"

// KeyPair is a certificate and its private key, PEM encoded.
type KeyPair struct {
	CertPEM []byte
	KeyPEM  []byte
}

// NewCA makes a self-signed CA valid from now for validity.
func NewCA(commonName string, now time.Time, validity time.Duration) (KeyPair, error) {
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	return issue(tmpl, nil, nil)
}

// IssueServer signs a server certificate for hosts (DNS names or IPs).
func IssueServer(ca KeyPair, hosts []string, now time.Time, validity time.Duration) (KeyPair, error) {
	caCert, caKey, err := ca.parse()
	if err != nil {
		return KeyPair{}, fmt.Errorf("CA: %w", err)
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "gantry server"},
		NotBefore:   now.Add(-time.Hour),
		NotAfter:    now.Add(validity),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return issue(tmpl, caCert, caKey)
}

func issue(tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (KeyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return KeyPair{}, fmt.Errorf("generate key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return KeyPair{}, fmt.Errorf("draw serial: %w", err)
	}
	tmpl.SerialNumber = serial
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return KeyPair{}, fmt.Errorf("sign certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return KeyPair{}, fmt.Errorf("encode key: %w", err)
	}
	return KeyPair{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

func (kp KeyPair) parse() (*x509.Certificate, *ecdsa.PrivateKey, error) {
	certs, err := ParseCertificates(kp.CertPEM)
	if err != nil {
		return nil, nil, err
	}
	block, _ := pem.Decode(kp.KeyPEM)
	if block == nil {
		return nil, nil, errors.New("no PEM private key")
	}
	key, err := x509.ParseECPrivateKey(block.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("parse private key: %w", err)
	}
	return certs[0], key, nil
}

// ParseCertificates reads every certificate of a PEM bundle, in order.
func ParseCertificates(bundle []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for rest := bundle; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parse certificate: %w", err)
		}
		certs = append(certs, cert)
	}
	if len(certs) == 0 {
		return nil, errors.New("no PEM certificate")
	}
	return certs, nil
}

// Pin is the CA's pin: sha256 of its SubjectPublicKeyInfo.
func Pin(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return PinPrefix + hex.EncodeToString(sum[:])
}

// ValidPin reports whether s has a pin's form.
func ValidPin(s string) bool {
	digest, ok := strings.CutPrefix(s, PinPrefix)
	if !ok || len(digest) != 2*sha256.Size {
		return false
	}
	_, err := hex.DecodeString(digest)
	return err == nil
}

// Covers reports whether cert is valid for every host until after the
// given time.
func Covers(cert *x509.Certificate, hosts []string, until time.Time) bool {
	if until.After(cert.NotAfter) {
		return false
	}
	return !slices.ContainsFunc(hosts, func(h string) bool { return cert.VerifyHostname(h) != nil })
}

// PinnedTransport reaches servers whose presented chain includes the CA
// with that pin, and whose certificate that CA signed for the host
// dialed. Nothing is sent to a server that fails it, nor over plain
// http:// (the pin would protect nothing there). The check sits in the
// TLS configuration, not in a dialer, so it holds through an HTTPS proxy
// too: Go's transport tunnels through CONNECT and then uses
// TLSClientConfig, never DialTLSContext. The host a certificate must name
// is not in the TLS connection state when it is an IP address, so each
// host gets a transport of its own that knows it.
func PinnedTransport(pin string) http.RoundTripper {
	return &pinnedTransport{pin: pin, proxy: http.ProxyFromEnvironment, byHost: map[string]*http.Transport{}}
}

// ErrPlainHTTP is a pinned client's refusal of an http:// URL.
var ErrPlainHTTP = errors.New("refusing plain http:// with a CA pin: the server's URL must be https://")

type pinnedTransport struct {
	pin    string
	proxy  func(*http.Request) (*url.URL, error)
	mu     sync.Mutex
	byHost map[string]*http.Transport
}

func (p *pinnedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Scheme != "https" {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, fmt.Errorf("%s: %w", r.URL.Redacted(), ErrPlainHTTP)
	}
	return p.forHost(r.URL.Hostname()).RoundTrip(r)
}

func (p *pinnedTransport) forHost(host string) *http.Transport {
	p.mu.Lock()
	defer p.mu.Unlock()
	if t, ok := p.byHost[host]; ok {
		return t
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = p.proxy
	t.TLSClientConfig = &tls.Config{
		MinVersion: tls.VersionTLS12,
		ServerName: host,
		// The chain is verified against the pinned CA in VerifyConnection
		// instead of the system's roots.
		InsecureSkipVerify: true, //nolint:gosec
		VerifyConnection:   func(cs tls.ConnectionState) error { return verifyPinned(cs, p.pin, host) },
	}
	p.byHost[host] = t
	return t
}

func (p *pinnedTransport) CloseIdleConnections() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, t := range p.byHost {
		t.CloseIdleConnections()
	}
}

func verifyPinned(cs tls.ConnectionState, pin, host string) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("server presented no certificate")
	}
	roots, intermediates := x509.NewCertPool(), x509.NewCertPool()
	found := false
	for _, cert := range cs.PeerCertificates {
		if Pin(cert) == pin {
			roots.AddCert(cert)
			found = true
		} else {
			intermediates.AddCert(cert)
		}
	}
	if !found {
		return fmt.Errorf("server certificate chain has no CA with pin %s: not the server the join token names", pin)
	}
	_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{DNSName: host, Roots: roots, Intermediates: intermediates})
	if err != nil {
		return fmt.Errorf("server certificate: %w", err)
	}
	return nil
}

// PoolClientConfig trusts the CAs of a PEM bundle.
func PoolClientConfig(caPEM []byte) (*tls.Config, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("no PEM certificate in the CA bundle")
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}, nil
}
