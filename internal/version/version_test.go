package version

import (
	"runtime/debug"
	"testing"
)

func TestVersionFromBuildInfo(t *testing.T) {
	bi := &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"}}}
	if got := fromBuild(bi, "").String(); got != "v1.2.3 (commit 0123456789ab, modified)" {
		t.Fatalf("got %q", got)
	}
	if got := fromBuild(&debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "feedbeef").String(); got != "devel (commit feedbeef)" {
		t.Fatalf("a commit given at link time: %q", got)
	}
	if got := fromBuild(nil, "").String(); got != "devel" {
		t.Fatalf("no build information: %q", got)
	}
}
