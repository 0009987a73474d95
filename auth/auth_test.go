package auth

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func signer(t *testing.T) *Signer {
	t.Helper()
	s, err := NewSigner([]byte(NewKey()))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestJoinToken(t *testing.T) {
	s := signer(t)
	now := time.Now()
	tok, err := s.Mint(JoinClaims{Cluster: "dev", MachineID: "m-1", ExpiresAt: now.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Verify(tok, "dev", now)
	if err != nil || c.MachineID != "m-1" {
		t.Fatalf("valid token refused: %v %+v", err, c)
	}
	if _, err := s.Verify(tok, "prod", now); !errors.Is(err, ErrWrongCluster) {
		t.Errorf("other cluster: %v", err)
	}
	if _, err := s.Verify(tok, "dev", now.Add(2*time.Minute)); !errors.Is(err, ErrExpired) {
		t.Errorf("expired: %v", err)
	}
	if _, err := signer(t).Verify(tok, "dev", now); !errors.Is(err, ErrBadSignature) {
		t.Errorf("foreign key: %v", err)
	}
	tampered := strings.Replace(tok, tok[10:14], "AAAA", 1)
	if _, err := s.Verify(tampered, "dev", now); err == nil {
		t.Errorf("tampered token accepted")
	}
	for _, bad := range []string{"", "gjt1.", "gjt1.abc", "nope.x.y", "gjt1.!!!.###"} {
		if _, err := s.Verify(bad, "dev", now); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestShortKeyRefused(t *testing.T) {
	if _, err := NewSigner([]byte("short")); err == nil {
		t.Fatal("short key accepted")
	}
}

func TestCredential(t *testing.T) {
	cred, hash := NewCredential("m-7")
	if id, ok := CredentialMachine(cred); !ok || id != "m-7" {
		t.Fatalf("machine of credential: %q %v", id, ok)
	}
	if !SecretMatches(cred, hash) {
		t.Fatal("credential does not match its own hash")
	}
	other, _ := NewCredential("m-7")
	if SecretMatches(other, hash) {
		t.Fatal("another credential matches")
	}
	if _, ok := CredentialMachine("gat1.xyz"); ok {
		t.Fatal("admin token parsed as a credential")
	}
}
