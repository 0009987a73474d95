// Package randid makes random identifiers from the operating system's
// CSPRNG (crypto/rand cannot fail on Linux).
package randid

import (
	"crypto/rand"
	"encoding/base32"
	"encoding/hex"
	"strings"
)

// Hex is n random bytes as 2n hex digits.
func Hex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

var lower = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// Base32 is n random lowercase base32 characters: 5 bits each, and only
// letters and digits, so it fits in names.
func Base32(n int) string {
	b := make([]byte, (n*5+7)/8)
	_, _ = rand.Read(b)
	return strings.ToLower(lower.EncodeToString(b))[:n]
}
