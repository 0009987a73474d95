package process

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/runtime"
)

func writeLog(t *testing.T, d *Driver, replica, content string) {
	t.Helper()
	if err := os.MkdirAll(d.ReplicaDir(replica), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(d.logPath(replica), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readAll(t *testing.T, r io.ReadCloser) string {
	t.Helper()
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestLogsTail(t *testing.T) {
	d := New(DefaultConfig(t.TempDir()))
	writeLog(t, d, "r", "one\ntwo\nthree\n")
	for _, tc := range []struct {
		tail int
		want string
	}{{-1, "one\ntwo\nthree\n"}, {0, ""}, {1, "three\n"}, {2, "two\nthree\n"}, {3, "one\ntwo\nthree\n"}, {10, "one\ntwo\nthree\n"}} {
		r, err := d.Logs(context.Background(), "m", "r", runtime.LogOptions{Tail: tc.tail})
		if err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, r); got != tc.want {
			t.Errorf("tail %d: %q, want %q", tc.tail, got, tc.want)
		}
	}
	// A last line without a newline counts as a line.
	writeLog(t, d, "p", "a\nb\npartial")
	r, _ := d.Logs(context.Background(), "m", "p", runtime.LogOptions{Tail: 1})
	if got := readAll(t, r); got != "partial" {
		t.Errorf("tail of unterminated line: %q", got)
	}
	// Longer than one read block.
	long := strings.Repeat(strings.Repeat("x", 99)+"\n", 1000)
	writeLog(t, d, "long", long+"last\n")
	r, _ = d.Logs(context.Background(), "m", "long", runtime.LogOptions{Tail: 2})
	if got := readAll(t, r); got != strings.Repeat("x", 99)+"\nlast\n" {
		t.Errorf("tail across blocks: %q", got)
	}
	if _, err := d.Logs(context.Background(), "m", "missing", runtime.LogOptions{Tail: -1}); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing replica: %v", err)
	}
}

func TestLogsFollowSeesNewOutputAndEndsWithContext(t *testing.T) {
	cfg := DefaultConfig(t.TempDir())
	cfg.LogPollInterval = 10 * time.Millisecond
	d := New(cfg)
	writeLog(t, d, "r", "old\n")
	ctx, cancel := context.WithCancel(context.Background())
	r, err := d.Logs(ctx, "m", "r", runtime.LogOptions{Follow: true, Tail: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	f, err := os.OpenFile(filepath.Join(d.ReplicaDir("r"), "output.log"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string)
	go func() {
		data, _ := io.ReadAll(r)
		got <- string(data)
	}()
	time.Sleep(50 * time.Millisecond)
	f.WriteString("new\n")
	f.Close()
	time.Sleep(50 * time.Millisecond)
	cancel()
	if s := <-got; s != "old\nnew\n" {
		t.Fatalf("followed %q", s)
	}
}

// Each start of a replica writes a log of its own; the one before (a
// crash, a restart, a replica of the same name before) is kept, its end
// bounded, for logs --previous.
func TestEachStartKeepsThePreviousInstancesOutput(t *testing.T) {
	cfg := DefaultConfig(t.TempDir())
	cfg.PreviousLogBytes = 8
	d := New(cfg)
	run := func(out string) {
		t.Helper()
		task, err := d.Start(context.Background(), runtime.Spec{ReplicaID: "r", Command: []string{"sh", "-c", "printf '" + out + "'"}})
		if err != nil {
			t.Fatal(err)
		}
		<-task.Done()
	}
	logs := func(previous bool) (string, error) {
		r, err := d.Logs(context.Background(), "m", "r", runtime.LogOptions{Tail: -1, Previous: previous})
		if err != nil {
			return "", err
		}
		return readAll(t, r), nil
	}
	run("first\n")
	if _, err := logs(true); err == nil || !strings.Contains(err.Error(), "no previous instance") {
		t.Fatalf("previous before any restart: %v, want none", err)
	}
	run("second crash\n")
	if got, _ := logs(false); got != "second crash\n" {
		t.Fatalf("current output %q, want the second instance's alone", got)
	}
	if got, err := logs(true); err != nil || got != "first\n" {
		t.Fatalf("previous output %q %v, want the first instance's", got, err)
	}
	run("third\n")
	if got, _ := logs(true); got != "d crash\n" {
		t.Fatalf("previous output %q, want the second instance's last 8 bytes", got)
	}
}
