// Package browser runs headless Chromium for the dashboard's tests and
// keeps what they produce (screenshots, load times) as artifacts.
package browser

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/chromedp/chromedp"
)

// Path finds Chromium: $GANTRY_CHROMIUM, else chromium on PATH (Debian's
// package). Without it a test skips, and on CI (CI=true) fails.
func Path(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("GANTRY_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no Chromium (Debian package chromium; scripts/chromium-up.sh installs it), and CI=true: the dashboard tests must run on CI")
	}
	t.Skip("no Chromium: install Debian's chromium (scripts/chromium-up.sh) to run the dashboard tests")
	return ""
}

// New starts a headless Chromium for the test and returns a tab's
// context; both end with the test.
func New(t testing.TB) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(Path(t)),
		chromedp.NoSandbox, // CI runs as root, where Chromium's sandbox cannot start
		chromedp.WindowSize(1400, 1000),
		chromedp.UserDataDir(t.TempDir()),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	return ctx
}

// ArtifactDir is where tests keep what a person should look at after the
// run: $GANTRY_ARTIFACTS, else artifacts/ at the repository's root.
func ArtifactDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("GANTRY_ARTIFACTS")
	if dir == "" {
		_, file, _, _ := runtime.Caller(0)
		dir = filepath.Join(filepath.Dir(file), "..", "..", "artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Keep writes an artifact and logs where it is.
func Keep(t testing.TB, name string, data []byte) {
	t.Helper()
	path := filepath.Join(ArtifactDir(t), name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("kept %s", path)
}
