package process

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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

// Measure counts the whole process group: a busy child of the replica's
// shell adds its CPU time. The child says when it runs (its first FIFO:
// the group is past exec, its memory counted) and when it has burned
// some CPU (the second), so the test waits on those, not on a clock.
func TestMeasureSumsTheProcessGroup(t *testing.T) {
	dir := t.TempDir()
	started, burned := filepath.Join(dir, "started"), filepath.Join(dir, "burned")
	for _, fifo := range []string{started, burned} {
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	d := New(DefaultConfig(t.TempDir()))
	child := `( echo > "$STARTED"; i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; echo > "$BURNED"; while :; do :; done ) & wait`
	tk, err := d.Start(context.Background(), runtime.Spec{ReplicaID: "r", Command: []string{"sh", "-c", child},
		Env: map[string]string{"STARTED": started, "BURNED": burned}})
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Stop(context.Background(), time.Second)
	m := tk.(runtime.Measurer)
	waitFor := func(fifo string) {
		t.Helper()
		read := make(chan error, 1)
		go func() { _, err := os.ReadFile(fifo); read <- err }() // once the child wrote and closed it
		select {
		case err := <-read:
			if err != nil {
				t.Fatal(err)
			}
		case <-tk.Done():
			if f, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
				f.Close() // lets the read end
			}
			t.Fatalf("the replica exited before it wrote %s: %v", filepath.Base(fifo), tk.ExitError())
		}
	}
	waitFor(started)
	first, err := m.Measure(context.Background())
	if err != nil || first.MemoryBytes <= 0 {
		t.Fatalf("first sample %+v %v", first, err)
	}
	waitFor(burned)
	second, err := m.Measure(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if second.CPU <= first.CPU {
		t.Fatalf("the busy child's CPU time is not counted with its group: %+v then %+v", first, second)
	}
}
