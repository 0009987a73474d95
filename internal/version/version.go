// Package version says which gantry this is: the module version and the
// commit it was built from, as the Go toolchain recorded them.
package version

import "runtime/debug"

// Info is the version and commit of this binary.
type Info struct {
	Version string `json:"version"`
	Commit  string `json:"commit,omitempty"`
	// Modified: built from a tree with uncommitted changes.
	Modified bool `json:"modified,omitempty"`
}

// commit may be set at link time (-ldflags "-X
// github.com/gantry-dev/gantry/internal/version.commit=SHA") where the
// toolchain records no VCS information (-buildvcs=false).
var commit string

// Get reads the build information ("devel" and no commit when the
// toolchain recorded none, as with `go run`).
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return fromBuild(bi, commit)
}

func fromBuild(bi *debug.BuildInfo, linkedCommit string) Info {
	info := Info{Version: "devel", Commit: linkedCommit}
	if bi == nil {
		return info
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		info.Version = v
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Commit = s.Value
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
	return info
}

// String is "VERSION (commit C[, modified])".
func (i Info) String() string {
	s := i.Version
	if i.Commit != "" {
		commit := i.Commit
		if len(commit) > 12 {
			commit = commit[:12]
		}
		s += " (commit " + commit
		if i.Modified {
			s += ", modified"
		}
		s += ")"
	}
	return s
}
