// Package testdocker gives tests a real Docker Engine: Require connects or
// skips (loudly), and fails on CI, where the test script starts dockerd.
// Workload runs the test binary itself as a small container workload, so no
// registry and no extra build is needed.
package testdocker

import (
	"io"

	"context"
	"fmt"
	"golang.org/x/term"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/runtime/docker"
	"github.com/moby/moby/client"
)

// WorkloadEnv selects the workload a test binary runs instead of its tests.
const WorkloadEnv = "GANTRY_TEST_WORKLOAD"

// Require returns a client of the local engine. Without one, the test is
// skipped, or fails when CI=true.
func Require(t testing.TB) *client.Client {
	t.Helper()
	cli, err := docker.NewClient("")
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err = cli.Ping(ctx, client.PingOptions{})
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("Docker Engine is required on CI and is not reachable: %v", err)
		}
		t.Skipf("SKIPPING: no Docker Engine reachable (%v); run ./scripts/test.sh as root to install and start it", err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// WorkloadImage builds an image whose entrypoint is this test binary (the
// container runs MaybeRunWorkload's workload), under a tag of this process
// (test runs on one host at once build their own), removed after the test.
func WorkloadImage(t testing.TB, cli *client.Client, name string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tag := fmt.Sprintf("gantry-test/%s:run%d", name, os.Getpid())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := docker.EnsureImage(ctx, cli, tag, exe); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = cli.ImageRemove(context.Background(), tag, client.ImageRemoveOptions{Force: true}) })
	return tag
}

// MaybeRunWorkload runs the workload named by $GANTRY_TEST_WORKLOAD and
// exits; call it first in TestMain. Workloads:
//   - http: serve GET / with "hello <GANTRY_REPLICA> <GREETING>" on $PORT
//     (the greeting read from the file $GREETING_FILE names, if set)
//   - exit:N: exit with status N after a short while
//
// Run as "/gantry probe-ok" or "/gantry probe-fail" (an exec health check
// inside the container), it exits 0 or 3 at once; as "/gantry
// echo-stdin" (an exec), it says whether its stdin is a terminal and its
// $GREETING, copies stdin to stdout, writes "done" on stderr and exits 5.
func MaybeRunWorkload() {
	if len(os.Args) == 2 && os.Args[1] == "echo-stdin" {
		echoStdin()
	}
	if len(os.Args) == 2 && (os.Args[1] == "probe-ok" || os.Args[1] == "probe-fail") {
		if os.Args[1] == "probe-fail" {
			fmt.Println("probe failing on purpose")
			os.Exit(3)
		}
		os.Exit(0)
	}
	mode := os.Getenv(WorkloadEnv)
	if mode == "" {
		return
	}
	switch {
	case mode == "http":
		serveHTTP()
	case strings.HasPrefix(mode, "exit:"):
		time.Sleep(200 * time.Millisecond)
		var code int
		fmt.Sscan(strings.TrimPrefix(mode, "exit:"), &code)
		fmt.Println("exiting with", code)
		os.Exit(code)
	}
	fmt.Fprintln(os.Stderr, "unknown workload", mode)
	os.Exit(2)
}

func serveHTTP() {
	fmt.Println("workload listening on", os.Getenv("PORT"))
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		greeting := os.Getenv("GREETING")
		if file := os.Getenv("GREETING_FILE"); file != "" {
			data, err := os.ReadFile(file)
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			greeting = string(data)
		}
		fmt.Fprintf(w, "hello %s %s\n", os.Getenv("GANTRY_REPLICA"), greeting)
	})
	l, err := net.Listen("tcp", ":"+os.Getenv("PORT"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	fmt.Fprintln(os.Stderr, srv.Serve(l))
	os.Exit(1)
}

func echoStdin() {
	fmt.Printf("terminal=%t greeting=%s\n", term.IsTerminal(0), os.Getenv("GREETING"))
	_, _ = io.Copy(os.Stdout, os.Stdin)
	fmt.Fprintln(os.Stderr, "done")
	os.Exit(5)
}
