package process

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/runtime"
)

// startSleeper runs a replica that waits, for commands to exec beside.
func startSleeper(t *testing.T) *task {
	t.Helper()
	d := New(DefaultConfig(t.TempDir()))
	tk, err := d.Start(context.Background(), runtime.Spec{ReplicaID: "r", Command: []string{"sleep", "300"}, Env: map[string]string{"GREETING": "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tk.Stop(context.Background(), time.Second) })
	return tk.(*task)
}

// An exec runs in the replica's directory and environment, with stdin,
// stdout and stderr apart, and says how the command exited.
func TestExecStreamOnPipes(t *testing.T) {
	tk := startSleeper(t)
	var out, errOut bytes.Buffer
	code, err := tk.ExecStream(context.Background(), []string{"sh", "-c", `echo "$GREETING $(pwd)"; cat; echo oops >&2; exit 7`},
		runtime.ExecStreams{Stdin: strings.NewReader("from stdin\n"), Stdout: &out, Stderr: &errOut})
	if err != nil || code != 7 {
		t.Fatalf("exit %d %v, want 7", code, err)
	}
	if want := "hi " + tk.dir + "\nfrom stdin\n"; out.String() != want || errOut.String() != "oops\n" {
		t.Fatalf("stdout %q stderr %q, want %q and oops", out.String(), errOut.String(), want)
	}
	if _, err := tk.ExecStream(context.Background(), []string{"no-such-command-xyz"}, runtime.ExecStreams{Stdout: &out, Stderr: &errOut}); err == nil {
		t.Error("an exec of a missing command succeeded")
	}
}

// On a terminal the command sees a TTY of the size asked for, and its
// output comes on stdout.
func TestExecStreamOnATerminal(t *testing.T) {
	tk := startSleeper(t)
	var out bytes.Buffer
	resize := make(chan runtime.TermSize, 1)
	resize <- runtime.TermSize{Cols: 123, Rows: 45}
	code, err := tk.ExecStream(context.Background(), []string{"sh", "-c", `test -t 0 && echo tty; stty size`},
		runtime.ExecStreams{Stdout: &out, TTY: true, Resize: resize})
	if err != nil || code != 0 {
		t.Fatalf("exit %d %v", code, err)
	}
	if got := strings.ReplaceAll(out.String(), "\r", ""); !strings.Contains(got, "tty\n45 123\n") {
		t.Fatalf("terminal output %q, want tty and the size 45 123", got)
	}
}

// A replica's process group is measured: its CPU time grows while it
// computes, and its resident memory is counted.
func TestMeasureSumsTheProcessGroup(t *testing.T) {
	d := New(DefaultConfig(t.TempDir()))
	tk, err := d.Start(context.Background(), runtime.Spec{ReplicaID: "r", Command: []string{"sh", "-c", "while :; do :; done & wait"}})
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Stop(context.Background(), time.Second)
	m := tk.(runtime.Measurer)
	// Right after the start the group may be mid-exec, its resident memory
	// not yet counted (CI saw a first sample of 0): the first sample is the
	// first that counts some.
	deadline := time.Now().Add(10 * time.Second)
	first, err := m.Measure(context.Background())
	for err == nil && first.MemoryBytes <= 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		first, err = m.Measure(context.Background())
	}
	if err != nil || first.MemoryBytes <= 0 {
		t.Fatalf("first sample %+v %v", first, err)
	}
	for {
		s, err := m.Measure(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if s.CPU > first.CPU {
			break // the busy child is counted with its group
		}
		if time.Now().After(deadline) {
			t.Fatalf("CPU time did not grow: %+v then %+v", first, s)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
