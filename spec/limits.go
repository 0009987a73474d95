package spec

// Limits of what a spec may ask for, checked on every apply, plan and
// validate with an error naming the limit (the request body size is the
// server's --max-request-bytes).
const (
	// MaxDocuments is the most resources in one file.
	MaxDocuments = 1000
	// MaxReplicas is the most replicas of one service.
	MaxReplicas = 10000
	// MaxGroupSize is the largest maxSize of a capacity group.
	MaxGroupSize = 10000
	// MaxEnvBytes bounds a service's environment (names and values).
	MaxEnvBytes = 64 << 10
)
