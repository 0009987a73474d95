package fleet

import (
	"crypto/rand"
	"encoding/hex"
)

// machineName is readable and unique: cluster, group and a random suffix.
func machineName(cluster, group string) string {
	return cluster + "-" + group + "-" + hexID(5)
}

func hexID(n int) string {
	b := make([]byte, (n+1)/2)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)[:n]
}
