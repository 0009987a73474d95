// Package auth issues and checks Gantry's secrets: join tokens (HMAC-signed,
// expiring, bound to one cluster and optionally one machine), machine
// credentials (random, stored only as SHA-256) and the admin token.
package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Errors a join token check returns; messages are safe to show.
var (
	ErrMalformedToken = errors.New("malformed join token")
	ErrBadSignature   = errors.New("join token not signed by this server")
	ErrExpired        = errors.New("join token expired")
	ErrWrongCluster   = errors.New("join token is for another cluster")
	ErrWrongMachine   = errors.New("join token is for another machine")
)

const joinTokenPrefix = "gjt1."

// JoinClaims is what a join token binds.
type JoinClaims struct {
	Cluster   string    `json:"c"`
	Group     string    `json:"g,omitempty"`
	MachineID string    `json:"m,omitempty"`
	ExpiresAt time.Time `json:"e"`
	Nonce     string    `json:"n"`
	// CAPin is the hash of the CA that signed the server's certificate
	// (see internal/pki): the agent verifies the server against it before
	// it sends the token. Empty when the server serves plain HTTP.
	CAPin string `json:"ca,omitempty"`
}

// Signer mints and verifies join tokens with one key.
type Signer struct {
	key   []byte
	caPin string
}

// WithCAPin returns a signer whose tokens carry the server CA's pin.
func (s *Signer) WithCAPin(pin string) *Signer {
	return &Signer{key: s.key, caPin: pin}
}

// NewSigner uses key (at least 32 bytes).
func NewSigner(key []byte) (*Signer, error) {
	if len(key) < 32 {
		return nil, fmt.Errorf("join token signing key must be at least 32 bytes, got %d", len(key))
	}
	return &Signer{key: key}, nil
}

// NewKey returns a fresh random signing key, hex encoded.
func NewKey() string {
	return hex.EncodeToString(RandomBytes(32))
}

// Mint signs claims into a token.
func (s *Signer) Mint(c JoinClaims) (string, error) {
	c.Nonce = base64.RawURLEncoding.EncodeToString(RandomBytes(9))
	c.CAPin = s.caPin
	payload, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("encode join claims: %w", err)
	}
	body := base64.RawURLEncoding.EncodeToString(payload)
	return joinTokenPrefix + body + "." + base64.RawURLEncoding.EncodeToString(s.mac(body)), nil
}

// Verify checks signature, expiry and the cluster the agent says it joins.
func (s *Signer) Verify(token, cluster string, now time.Time) (JoinClaims, error) {
	body, sig, ok := splitJoinToken(token)
	if !ok {
		return JoinClaims{}, ErrMalformedToken
	}
	gotSig, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		return JoinClaims{}, ErrMalformedToken
	}
	if !hmac.Equal(gotSig, s.mac(body)) {
		return JoinClaims{}, ErrBadSignature
	}
	c, err := decodeClaims(body)
	if err != nil {
		return c, err
	}
	if !now.Before(c.ExpiresAt) {
		return c, ErrExpired
	}
	if c.Cluster != cluster {
		return c, ErrWrongCluster
	}
	return c, nil
}

// PeekClaims reads a token's claims without checking its signature: an
// agent learns the CA pin from its token before it can reach the server.
func PeekClaims(token string) (JoinClaims, error) {
	body, _, ok := splitJoinToken(token)
	if !ok {
		return JoinClaims{}, ErrMalformedToken
	}
	return decodeClaims(body)
}

func splitJoinToken(token string) (body, sig string, ok bool) {
	rest, ok := strings.CutPrefix(token, joinTokenPrefix)
	if !ok {
		return "", "", false
	}
	return strings.Cut(rest, ".")
}

func decodeClaims(body string) (JoinClaims, error) {
	var c JoinClaims
	payload, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil || json.Unmarshal(payload, &c) != nil {
		return c, ErrMalformedToken
	}
	return c, nil
}

func (s *Signer) mac(body string) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(body))
	return m.Sum(nil)
}

// NewCredential returns a machine credential "<machineID>.<secret>" and the
// hash to store.
func NewCredential(machineID string) (credential string, hash []byte) {
	secret := base64.RawURLEncoding.EncodeToString(RandomBytes(32))
	credential = "gmc1." + machineID + "." + secret
	return credential, HashSecret(credential)
}

// CredentialMachine returns the machine a credential claims to be, before
// it is checked against the stored hash.
func CredentialMachine(credential string) (string, bool) { return idAfter("gmc1.", credential) }

// idAfter is the id between a secret's prefix and its random part.
func idAfter(prefix, secret string) (string, bool) {
	rest, ok := strings.CutPrefix(secret, prefix)
	if !ok {
		return "", false
	}
	id, _, ok := strings.Cut(rest, ".")
	return id, ok && id != ""
}

// HashSecret hashes a secret for storage.
func HashSecret(secret string) []byte {
	sum := sha256.Sum256([]byte(secret))
	return sum[:]
}

// SecretMatches compares a presented secret with a stored hash in constant
// time.
func SecretMatches(presented string, hash []byte) bool {
	return subtle.ConstantTimeCompare(HashSecret(presented), hash) == 1
}

// NewAdminToken returns a fresh admin token.
func NewAdminToken() string {
	return "gat1." + base64.RawURLEncoding.EncodeToString(RandomBytes(32))
}

// RandomBytes reads n bytes from the OS's CSPRNG (which cannot fail on
// Linux since Go 1.24's crypto/rand guarantees).
func RandomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// NewToken returns an API token's secret: its id in clear (to find its
// hash) and a random part.
func NewToken(id string) string {
	return "gtk1." + id + "." + base64.RawURLEncoding.EncodeToString(RandomBytes(32))
}

// NewJoinToken is a join-kind API token's secret: NewToken's, followed
// by the hex digest of the server CA's pin, which the agent verifies the
// server with before it sends the token.
func NewJoinToken(id, caPin string) string {
	secret := NewToken(id)
	if digest, ok := strings.CutPrefix(caPin, "sha256:"); ok {
		secret += "." + digest
	}
	return secret
}

// TokenCAPin is the CA pin a join token carries (either form), or "".
func TokenCAPin(token string) string {
	if claims, err := PeekClaims(token); err == nil {
		return claims.CAPin
	}
	if _, ok := TokenID(token); !ok {
		return ""
	}
	parts := strings.Split(token, ".")
	if len(parts) != 4 || len(parts[3]) != 2*sha256.Size {
		return ""
	}
	if _, err := hex.DecodeString(parts[3]); err != nil {
		return ""
	}
	return "sha256:" + parts[3]
}

// TokenID returns the id an API token claims, before it is checked
// against the stored hash.
func TokenID(token string) (string, bool) { return idAfter("gtk1.", token) }
