package spec

import (
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/gantry-dev/gantry/api"
)

// Secrets in specs: a `kind: Secret` document names its keys and where
// the server reads each value (its environment or a file); services take
// values with env entries that carry a secretRef. No value is ever
// written in a spec, and no error message holds one.

var secretKeyRe = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

// MaxSecretBytes bounds a Secret's keys and values together.
const MaxSecretBytes = 64 << 10

// ValidateSecret checks a Secret document.
func ValidateSecret(sec *api.Secret) ErrorList {
	errs := validateName(sec.Metadata.Name)
	if len(sec.Spec.Keys) == 0 {
		errs.add("spec.keys", "required: each key with where the server reads its value (env or file)")
	}
	for _, k := range sortedKeysOf(sec.Spec.Keys) {
		path := childPath("spec.keys", k)
		if !secretKeyRe.MatchString(k) {
			errs.add(path, "invalid key (letters, digits, '.', '_' and '-')")
		}
		ref := sec.Spec.Keys[k]
		if ref.Name != "" || ref.Key != "" {
			errs.add(path, "a Secret's value comes from env or file on the server, not from another Secret")
		} else if (ref.Env == "") == (ref.File == "") {
			errs.add(path, "exactly one of env or file is required (secret values are never written in specs)")
		}
	}
	return errs
}

// ValidateSecretData checks the values of a Secret created through the
// API. Messages name keys, never values.
func ValidateSecretData(name string, data map[string]string) ErrorList {
	errs := validateName(name)
	if len(data) == 0 {
		errs.add("data", "required: at least one key")
	}
	size := 0
	for _, k := range sortedStringKeys(data) {
		if !secretKeyRe.MatchString(k) {
			errs.add(childPath("data", k), "invalid key (letters, digits, '.', '_' and '-')")
		}
		size += len(k) + len(data[k])
	}
	if size > MaxSecretBytes {
		errs.add("data", "holds %d bytes, over the limit of %d", size, MaxSecretBytes)
	}
	return errs
}

// ResolveSecretValues reads a Secret document's values on the server.
func ResolveSecretValues(sec *api.Secret, lookupEnv func(string) (string, bool)) (map[string]string, ErrorList) {
	var errs ErrorList
	values := map[string]string{}
	for _, k := range sortedKeysOf(sec.Spec.Keys) {
		v, err := ReadSecret(sec.Spec.Keys[k], lookupEnv)
		if fe, ok := err.(*FieldError); ok {
			errs.add(childPath("spec.keys", k)+fe.Path, "%s", fe.Message)
			continue
		}
		values[k] = v
	}
	if errs == nil {
		errs = append(errs, ValidateSecretData(sec.Metadata.Name, values)...)
	}
	return values, errs
}

// SecretNames are the Secrets a service's replicas use.
func SecretNames(s api.ServiceSpec) []string {
	seen := map[string]bool{}
	var names []string
	for _, ref := range s.SecretEnv {
		if !seen[ref.Name] {
			seen[ref.Name] = true
			names = append(names, ref.Name)
		}
	}
	sort.Strings(names)
	return names
}

// ClusterSecretNames are the Secrets a cluster's machines use (monitoring
// headers).
func ClusterSecretNames(c *api.Cluster) []string {
	var names []string
	if m := c.Spec.Monitoring; m != nil {
		for _, h := range m.Headers {
			if h.SecretRef.Name != "" && !slices.Contains(names, h.SecretRef.Name) {
				names = append(names, h.SecretRef.Name)
			}
		}
	}
	sort.Strings(names)
	return names
}

// SecretEnvPath names a secret environment variable as an operator
// writes it: an entry of spec.env with a secretRef.
func SecretEnvPath(name string) string { return "spec.env[name=" + name + "]" }

func validateSecretEnv(s api.ServiceSpec) ErrorList {
	var errs ErrorList
	for _, k := range sortedKeysOf(s.SecretEnv) {
		path, ref := SecretEnvPath(k), s.SecretEnv[k]
		switch {
		case !envNameRe.MatchString(k):
			errs.add(path, "invalid environment variable name")
		case k == "PORT" || strings.HasPrefix(k, "GANTRY_"):
			errs.add(path, "reserved: Gantry sets PORT and GANTRY_* itself")
		case hasKey(s.Env, k):
			errs.add(path, "also set as a plain value in spec.env")
		}
		if ref.As != "" && ref.As != api.SecretAsFile && ref.As != api.SecretAsEnv {
			errs.add(path+".secretRef.as", "%q: want file (the default: a file named by %s_FILE) or env", ref.As, k)
		}
		if ref.Name == "" || ref.Key == "" {
			errs.add(path+".secretRef", "name and key of a Secret are required")
		} else if len(validateName(ref.Name)) > 0 || !secretKeyRe.MatchString(ref.Key) {
			errs.add(path+".secretRef", "%q/%q is not a valid Secret name and key", ref.Name, ref.Key)
		}
	}
	return errs
}

// validateHeaderRef: a monitoring header's value is an environment
// variable or a file of the server, or a key of a Secret.
func validateHeaderRef(path string, ref api.SecretRef) ErrorList {
	var errs ErrorList
	sources := 0
	for _, set := range []bool{ref.Env != "", ref.File != "", ref.Name != "" || ref.Key != ""} {
		if set {
			sources++
		}
	}
	switch {
	case sources != 1:
		errs.add(path, "exactly one of env, file, or name and key of a Secret is required (secret values are never written in specs)")
	case ref.Name != "" && (ref.Key == "" || len(validateName(ref.Name)) > 0 || !secretKeyRe.MatchString(ref.Key)):
		errs.add(path, "%q/%q is not a valid Secret name and key", ref.Name, ref.Key)
	}
	return errs
}

// splitEnvList turns the list form of a service's env (entries with a
// name and a value or a secretRef) into env and secretEnv.
func splitEnvList(path string, m map[string]any, errs *ErrorList) {
	list, ok := m["env"].([]any)
	if !ok {
		return
	}
	if _, both := m["secretEnv"]; both {
		errs.add(childPath(path, "secretEnv"), "give secret values as env entries with a secretRef, or in secretEnv, not both")
		return
	}
	env, secretEnv := map[string]any{}, map[string]any{}
	for i, item := range list {
		itemPath := indexPath(childPath(path, "env"), i)
		entry, ok := asMap(item)
		if !ok {
			errs.add(itemPath, "expected an object with name and value or secretRef, got %s", describe(item))
			continue
		}
		name, _ := entry["name"].(string)
		_, hasValue := entry["value"]
		ref, hasRef := entry["secretRef"]
		switch {
		case name == "":
			errs.add(itemPath+".name", "required")
		case hasValue == hasRef:
			errs.add(itemPath, "exactly one of value or secretRef is required")
		case env[name] != nil || secretEnv[name] != nil:
			errs.add(itemPath+".name", "duplicate %q", name)
		case hasRef:
			secretEnv[name] = ref
		default:
			env[name] = entry["value"]
		}
		for key := range entry {
			if key != "name" && key != "value" && key != "secretRef" {
				errs.add(itemPath+"."+key, "%s", unknownField(key, []string{"name", "secretRef", "value"}))
			}
		}
	}
	m["env"] = env
	if len(secretEnv) > 0 {
		m["secretEnv"] = secretEnv
	}
}
