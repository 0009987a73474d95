package api

import "time"

// TokenKind is what a token may do.
type TokenKind string

// Token kinds. Agents hold machine credentials, issued at join.
const (
	// TokenAdmin may do everything.
	TokenAdmin TokenKind = "admin"
	// TokenReadOnly may read everything and change nothing.
	TokenReadOnly TokenKind = "read-only"
	// TokenJoin may join machines to one cluster's group, MaxUses times.
	TokenJoin TokenKind = "join"
)

// Token is an API token as listed: never its secret, which is stored
// hashed and shown once, at creation.
type Token struct {
	ID          string    `json:"id"`
	Kind        TokenKind `json:"kind"`
	Description string    `json:"description,omitempty"`
	// Cluster and Group bind a join token.
	Cluster   string     `json:"cluster,omitempty"`
	Group     string     `json:"group,omitempty"`
	CreatedAt time.Time  `json:"createdAt"`
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
	// MaxUses bounds a join token's joins (0: unbounded); Uses counts them
	// (an unbounded token's are not counted).
	MaxUses   int        `json:"maxUses,omitempty"`
	Uses      int        `json:"uses,omitempty"`
	RevokedAt *time.Time `json:"revokedAt,omitempty"`
}

// TokenRequest creates a token.
type TokenRequest struct {
	Kind        TokenKind `json:"kind"`
	Description string    `json:"description,omitempty"`
	Cluster     string    `json:"cluster,omitempty"`
	Group       string    `json:"group,omitempty"`
	// TTL is how long the token is valid ("" for join: 24h; for others:
	// until revoked).
	TTL string `json:"ttl,omitempty"`
	// MaxUses of a join token: 1 unless set; 0 is refused, -1 unbounded.
	MaxUses int `json:"maxUses,omitempty"`
}

// TokenResponse is a new token with its secret, shown this once.
type TokenResponse struct {
	Token
	Secret string `json:"secret"`
	// CACertHash pins the server's CA (join tokens carry it too).
	CACertHash string `json:"caCertHash,omitempty"`
}
