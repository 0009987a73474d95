package api

// KindSecret is a Secret document.
const KindSecret = "Secret"

// Secret is a named set of secret values (keys and their values). Its
// values are sealed in the store and never returned by any API call:
// a Secret reads back as its keys and its revision only. The values go
// to the agents running replicas that reference them, and to the agents
// of a cluster whose monitoring headers do.
type Secret struct {
	APIVersion string      `json:"apiVersion,omitempty"`
	Kind       string      `json:"kind,omitempty"`
	Metadata   ObjectMeta  `json:"metadata"`
	Spec       SecretSpec  `json:"spec,omitempty"`
	Status     *SecretInfo `json:"status,omitempty"`
}

// SecretSpec is how a Secret is declared in a spec file: each key's value
// is read on the server (an environment variable or a file), never
// written in the spec.
type SecretSpec struct {
	// Keys are the Secret's values, each read from the server's environment
	// or a file when applied (never written in the file).
	Keys map[string]SecretRef `json:"keys,omitempty"`
}

// SecretInfo is what the server tells of a Secret: its keys and a
// revision that changes whenever a value does (replicas and machines
// that use it roll then).
type SecretInfo struct {
	Keys     []string `json:"keys"`
	Revision string   `json:"revision"`
}

// SecretKeyRef names one key of a Secret.
type SecretKeyRef struct {
	Name string `json:"name"`
	Key  string `json:"key"`
	// As is how a replica gets the value: "file" (the default where the
	// runtime can: a file on a tmpfs, named by <NAME>_FILE, so the
	// engine's `docker inspect` never shows it) or "env" (the variable
	// itself, visible to whoever may inspect the container). The process
	// runtime gives every value as env.
	As string `json:"as,omitempty"`
}

// Ways a secret value reaches a replica.
const (
	SecretAsFile = "file"
	SecretAsEnv  = "env"
)

// SecretRequest creates or replaces a Secret's values
// (POST /v1/secrets, PUT /v1/secrets/{name}).
type SecretRequest struct {
	Name string            `json:"name,omitempty"`
	Data map[string]string `json:"data"`
}
