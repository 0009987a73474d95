package auth

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// Sealer encrypts the server's secrets at rest (AES-256-GCM): what the
// store holds is useless without the key, which lives outside it (the
// environment, or a 0600 file in the data dir).
type Sealer struct {
	aead cipher.AEAD
}

const sealedPrefix = "sealed1:"

// ErrWrongKey: a sealed value does not open with this key.
var ErrWrongKey = errors.New("sealed with another encryption key")

// NewSealer uses a 32-byte key, given hex encoded.
func NewSealer(hexKey string) (*Sealer, error) {
	key, err := hex.DecodeString(strings.TrimSpace(hexKey))
	if err != nil || len(key) != 32 {
		return nil, errors.New("encryption key: want 64 hex digits (32 bytes)")
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("encryption key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("encryption key: %w", err)
	}
	return &Sealer{aead: aead}, nil
}

// NewEncryptionKey returns a fresh key, hex encoded.
func NewEncryptionKey() string { return hex.EncodeToString(RandomBytes(32)) }

// Seal encrypts value; context binds it to its use (a value sealed for
// one key name does not open as another).
func (s *Sealer) Seal(value, context string) string {
	nonce := RandomBytes(s.aead.NonceSize())
	out := s.aead.Seal(nonce, nonce, []byte(value), []byte(context))
	return sealedPrefix + base64.RawStdEncoding.EncodeToString(out)
}

// IsSealed reports whether stored is a sealed value (older stores hold
// plain ones).
func IsSealed(stored string) bool { return strings.HasPrefix(stored, sealedPrefix) }

// Open decrypts a sealed value.
func (s *Sealer) Open(stored, context string) (string, error) {
	data, err := base64.RawStdEncoding.DecodeString(strings.TrimPrefix(stored, sealedPrefix))
	n := s.aead.NonceSize()
	if !IsSealed(stored) || err != nil || len(data) < n {
		return "", errors.New("not a sealed value")
	}
	plain, err := s.aead.Open(nil, data[:n], data[n:], []byte(context))
	if err != nil {
		return "", ErrWrongKey
	}
	return string(plain), nil
}
