package cli

import (
	"fmt"
	"strings"
)

// target is one kind and the names asked of it (none: all of them).
type target struct {
	kind  string
	names []string
}

// allKinds are what `gantry get all` lists, as kubectl's "all" lists a
// namespace's workloads: what is declared, then what runs.
var allKinds = []string{"clusters", "services", "failovergroups", "machines", "replicas"}

// parseTargets reads kubectl's forms of resource arguments: KIND [NAME
// ...], KIND/NAME ... (what -o name prints), KIND,KIND and all.
func parseTargets(args []string) ([]target, error) {
	if len(args) == 0 {
		return nil, fmt.Errorf("say what to get: a kind (%s, or all), KIND NAME, or KIND/NAME", strings.Join(kindNames, ", "))
	}
	if strings.Contains(args[0], "/") {
		return slashTargets(args)
	}
	var kinds []string
	for _, k := range strings.Split(args[0], ",") {
		if strings.EqualFold(k, "all") {
			kinds = append(kinds, allKinds...)
			continue
		}
		kind, err := canonicalKind(k)
		if err != nil {
			return nil, err
		}
		kinds = append(kinds, kind)
	}
	names := args[1:]
	if len(names) > 0 && len(kinds) > 1 {
		return nil, fmt.Errorf("names (%s) with several kinds: write KIND/NAME for each", strings.Join(names, " "))
	}
	for _, n := range names {
		if strings.Contains(n, "/") {
			return nil, fmt.Errorf("%q: give either KIND NAME or KIND/NAME, not both", n)
		}
	}
	out := make([]target, 0, len(kinds))
	for _, k := range kinds {
		out = append(out, target{kind: k, names: names})
	}
	return out, nil
}

// slashTargets reads KIND/NAME arguments, grouping the names by kind in
// the order the kinds first appear.
func slashTargets(args []string) ([]target, error) {
	var out []target
	index := map[string]int{}
	for _, a := range args {
		kind, name, err := splitKindName(a)
		if err != nil {
			return nil, err
		}
		i, ok := index[kind]
		if !ok {
			i = len(out)
			index[kind] = i
			out = append(out, target{kind: kind})
		}
		out[i].names = append(out[i].names, name)
	}
	return out, nil
}

// splitKindName reads one KIND/NAME.
func splitKindName(arg string) (kind, name string, err error) {
	k, name, ok := strings.Cut(arg, "/")
	if !ok || k == "" || name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("%q: want KIND/NAME, such as replica/web-1", arg)
	}
	kind, err = canonicalKind(k)
	return kind, name, err
}

// kindAndName reads the object a command acts on: KIND NAME or KIND/NAME
// (kinds limited to allowed, in the command's words).
func kindAndName(args []string, allowed ...string) (kind, name string, err error) {
	switch {
	case len(args) == 1 && strings.Contains(args[0], "/"):
		kind, name, err = splitKindName(args[0])
	case len(args) == 2:
		kind, err = canonicalKind(args[0])
		name = args[1]
	default:
		return "", "", fmt.Errorf("want KIND NAME or KIND/NAME")
	}
	if err != nil {
		return "", "", err
	}
	for _, a := range allowed {
		if a == kind {
			return kind, name, nil
		}
	}
	return "", "", fmt.Errorf("%s: not one of %s", kind, strings.Join(allowed, ", "))
}

// singular is a kind as -o name and KIND/NAME write it.
func singular(kind string) string {
	if kind == "endpoints" {
		return kind
	}
	return strings.TrimSuffix(kind, "s")
}
