// Package testnet is what tests that make network namespaces need: root,
// ip(8) and, for the overlay, a TUN device. Without them a test skips,
// except on CI (CI=true), which runs as root and has them: there their
// absence fails.
package testnet

import (
	"os"
	"os/exec"
	"testing"
)

// Require skips (fails on CI) unless this process may make network
// namespaces with ip(8); tun asks for /dev/net/tun too.
func Require(t testing.TB, tun bool) {
	t.Helper()
	skip := t.Skipf
	if os.Getenv("CI") == "true" {
		skip = t.Fatalf
	}
	if os.Geteuid() != 0 {
		skip("network namespaces need root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		skip("ip(8) is not installed (Debian package iproute2)")
	}
	if _, err := os.Stat("/dev/net/tun"); tun && err != nil {
		skip("no /dev/net/tun: %v", err)
	}
}
