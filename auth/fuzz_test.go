package auth

import (
	"testing"
	"time"
)

// FuzzVerify: no token makes the verifier panic, and only a token this
// signer minted for the cluster verifies.
func FuzzVerify(f *testing.F) {
	signer, err := NewSigner([]byte("fuzz-signing-key-of-enough-length"))
	if err != nil {
		f.Fatal(err)
	}
	now := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	good, err := signer.Mint(JoinClaims{Cluster: "dev", Group: "g", ExpiresAt: now.Add(time.Hour)})
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{good, "", ".", "a.b", good + "x", good[:len(good)/2]} {
		f.Add(seed, "dev")
	}
	f.Fuzz(func(t *testing.T, token, cluster string) {
		claims, err := signer.Verify(token, cluster, now)
		if err != nil {
			return
		}
		if claims.Cluster != cluster || !claims.ExpiresAt.After(now) {
			t.Fatalf("verified claims %+v for cluster %q", claims, cluster)
		}
		if token != good {
			// Another encoding of the same signed claims is fine only if
			// it carries them unchanged.
			if claims.Cluster != "dev" || claims.Group != "g" {
				t.Fatalf("a token the signer never minted verified: %q → %+v", token, claims)
			}
		}
	})
}
