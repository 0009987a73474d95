package e2e

import (
	"strings"
	"syscall"
	"testing"
)

// An agent stops answering (SIGSTOP: its replicas keep serving, as in a
// network partition): after the reschedule grace its replicas run
// elsewhere, and the copies on the partitioned machine are gone, so no
// replica answers from two places.
func TestPartitionedMachineLeavesNoDuplicates(t *testing.T) {
	s := startWeb(t)
	dir := s.dataDir
	before := s.replicas("web")
	victim := busiestMachine(before)
	pid := instanceOf(t, dir, victim).PID
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(pid, syscall.SIGCONT)
	waitFor(t, "replicas moved off the partitioned machine", func() (bool, string) {
		rs := s.replicas("web")
		for _, r := range rs {
			if r.Machine == victim {
				return false, r.ID + " still on " + victim
			}
		}
		return allAnswer(rs, 3)
	})
	_ = syscall.Kill(pid, syscall.SIGCONT)
	waitFor(t, "the old copies gone", func() (bool, string) {
		for _, r := range before {
			if r.Machine != victim {
				continue
			}
			if body, ok := answers(r); ok {
				return false, "old copy still answers: " + strings.TrimSpace(body)
			}
		}
		return true, ""
	})
	events, _, _ := s.gantry("get", "events")
	for _, want := range []string{"Unreachable", "unreachable for"} {
		if !strings.Contains(events, want) {
			t.Fatalf("events lack %q:\n%s", want, events)
		}
	}
}
