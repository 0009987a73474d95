package auth

import (
	"errors"
	"strings"
	"testing"
)

func TestSealer(t *testing.T) {
	s, err := NewSealer(NewEncryptionKey())
	if err != nil {
		t.Fatal(err)
	}
	sealed := s.Seal("the-signing-key", "join-signing-key")
	if strings.Contains(sealed, "the-signing-key") || !IsSealed(sealed) {
		t.Fatalf("sealed value shows its plaintext: %s", sealed)
	}
	if got, err := s.Open(sealed, "join-signing-key"); err != nil || got != "the-signing-key" {
		t.Fatalf("open: %q %v", got, err)
	}
	if _, err := s.Open(sealed, "another-use"); !errors.Is(err, ErrWrongKey) {
		t.Fatalf("opened for another use: %v", err)
	}
	other, _ := NewSealer(NewEncryptionKey())
	if _, err := other.Open(sealed, "join-signing-key"); !errors.Is(err, ErrWrongKey) {
		t.Fatalf("opened with another key: %v", err)
	}
	if _, err := NewSealer("short"); err == nil {
		t.Fatal("a short key must be refused")
	}
}
