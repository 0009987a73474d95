package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gantry-dev/gantry/internal/browser"
)

const secondCluster = `kind: Cluster
metadata:
  name: edge
spec:
  provider:
    name: local
  capacityGroups:
    - groupId: small
      instanceType: local.small
      minSize: 1
      maxSize: 1
`

// TestDashboardFollowsDevLive signs in to the dashboard of `gantry dev`
// with a read-only token in headless Chromium, and without reloading the
// page sees a cluster come up, a replica appear and run, and a
// deployment complete; a screenshot of each page is kept.
func TestDashboardFollowsDevLive(t *testing.T) {
	t.Parallel() // see parallelTests in helpers_test.go
	tab := browser.New(t)
	dir := filepath.Join(t.TempDir(), "state")
	dashboard := startDev(t, dir)
	readOnly, stderr, code := runGantry(t, "--data-dir", dir, "token", "create", "--kind", "read-only")
	if code != 0 {
		t.Fatalf("token create: %s", stderr)
	}
	signIn(t, tab, dashboard, strings.TrimSpace(readOnly))

	run(t, tab, "clusters page", chromedp.Navigate(dashboard), chromedp.WaitVisible(`section[data-cluster="dev"]`), markPage())
	if _, stderr, code := runGantry(t, "--data-dir", dir, "apply", "-f", writeFile(t, t.TempDir(), "edge.yaml", secondCluster)); code != 0 {
		t.Fatalf("apply edge: %s", stderr)
	}
	waitText(t, tab, `section[data-cluster="edge"] tr[data-group="small"] td.joined`, "1")
	keepScreenshot(t, tab, "dashboard-clusters.png")
	assertNotReloaded(t, tab)

	run(t, tab, "service page", chromedp.Navigate(dashboard+"services/hello"), chromedp.WaitVisible(`tr[data-replica="hello-0"]`), markPage())
	waitCount(t, tab, `tr[data-replica^="hello-"][data-state="running"]`, 3)
	if _, stderr, code := runGantry(t, "--data-dir", dir, "scale", "service", "hello", "--replicas", "4"); code != 0 {
		t.Fatalf("scale: %s", stderr)
	}
	waitCount(t, tab, `tr[data-replica="hello-3"][data-state="running"]`, 1)
	changed := strings.Replace(readExample(t), "hello from Gantry", "hello again", 1)
	changed = strings.Replace(changed, "replicas: 3", "replicas: 4", 1)
	if _, stderr, code := runGantry(t, "--data-dir", dir, "apply", "-f", writeFile(t, t.TempDir(), "hello.yaml", changed)); code != 0 {
		t.Fatalf("apply the new revision: %s", stderr)
	}
	waitText(t, tab, `section.deployment[data-revision="2"] .deploy-state`, "Complete")
	keepScreenshot(t, tab, "dashboard-service.png")
	assertNotReloaded(t, tab)

	// From the service's table to a replica (the first row's: the new
	// revision's replicas have new names): its output, its URL, and back
	// to its service by the link.
	run(t, tab, "replica page", clickLive(`tr[data-replica^="hello-"] a[href^="/ui/replicas/hello-"]`),
		chromedp.WaitVisible(chromedp.CSS(`section.replica[data-replica^="hello-"]`)), markPage())
	waitContains(t, tab, `#logs`, "hello listening on")
	waitContains(t, tab, `#replica-url`, "http://")
	keepScreenshot(t, tab, "dashboard-replica.png")
	run(t, tab, "previous output", clickLive(`a[href="?previous=1"]`), chromedp.WaitVisible(chromedp.CSS(`#logs, #logs-error`)))
	run(t, tab, "back to the service", clickLive(`section.replica a[href="/ui/services/hello"]`),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-revision="2"].current`)))

	for _, page := range []string{"machines", "events", "cost"} {
		run(t, tab, page+" page", chromedp.Navigate(dashboard+page), chromedp.WaitVisible(`main#view table`))
		keepScreenshot(t, tab, "dashboard-"+page+".png")
	}

	// What changed between the two revisions, the machines with their
	// replicas, and the fleet's history drawn by uPlot (dev samples it
	// every second here).
	run(t, tab, "revision diff", chromedp.Navigate(dashboard+"services/hello?from=1&to=2"), chromedp.WaitVisible(`#revision-diff`))
	waitContains(t, tab, `#revision-diff`, `spec.env.GREETING: "hello from Gantry" → "hello again"`)
	run(t, tab, "topology page", chromedp.Navigate(dashboard+"topology"), chromedp.WaitVisible(`.topology`))
	waitCount(t, tab, `.machine-box a.replica-box.state-running[data-replica^="hello-"]`, 4)
	keepScreenshot(t, tab, "dashboard-topology.png")
	run(t, tab, "charts page", chromedp.Navigate(dashboard+"charts"), chromedp.WaitVisible(`#chart-cost`))
	waitCount(t, tab, `.charts .uplot canvas`, 5)
	keepScreenshot(t, tab, "dashboard-charts.png")

	simulateInTheBrowser(t, tab, dashboard, dir)
	shellInTheBrowser(t, tab, dashboard, dir)
}

// simulateInTheBrowser keeps a trace of hello's demand with the CLI and
// runs it from the Simulate page, read-only, with the two policies the
// page offers: their table and plot come back.
func simulateInTheBrowser(t *testing.T, tab context.Context, dashboard, dir string) {
	t.Helper()
	trace := "time,service,replicas\n2026-01-01T00:00:00Z,hello,3\n2026-01-01T00:20:00Z,hello,12\n2026-01-01T01:00:00Z,hello,3\n2026-01-01T02:00:00Z,hello,3\n"
	out, stderr, code := runGantry(t, "--data-dir", dir, "trace", "put", "hello-burst", writeFile(t, t.TempDir(), "burst.csv", trace))
	if code != 0 || !strings.Contains(out, "trace/hello-burst: 4 rows of hello") {
		t.Fatalf("trace put: %s %s", out, stderr)
	}
	if out, stderr, code := runGantry(t, "--data-dir", dir, "trace", "list"); code != 0 || !strings.Contains(out, "hello-burst") {
		t.Fatalf("trace list: %s %s", out, stderr)
	}
	run(t, tab, "simulate page", chromedp.Navigate(dashboard+"simulate"), chromedp.WaitVisible(`#simulate`))
	// The world of local machines, which boot in seconds (a cloud's
	// minute would outlast dev's one-minute join timeout).
	run(t, tab, "a local world", chromedp.SetValue(`textarea[name="world"]`, "bootToJoin: {min: 1s, max: 3s}\nterminateLatency: {min: 1s, max: 2s}\n"))
	run(t, tab, "simulate", chromedp.Click(`#simulate button`), chromedp.WaitVisible(chromedp.CSS(`#simulation-plot, #simulate-error`)))
	waitContains(t, tab, `#simulation-table`, "patient")
	waitContains(t, tab, `#simulation-table`, "this-server")
	if table := value(t, tab, "the table", chromedp.TextContent(`#simulation-table`)); strings.Contains(table, "join-timeout") {
		t.Errorf("machines of a local world timed out joining:\n%s", table)
	}
	keepScreenshot(t, tab, "dashboard-simulate.png")
}

// shellInTheBrowser opens a replica's shell from its page: refused to the
// read-only session with the API's reason, then run by an admin's, whose
// keys reach the replica's shell and whose output comes back.
func shellInTheBrowser(t *testing.T, tab context.Context, dashboard, dir string) {
	t.Helper()
	run(t, tab, "a replica's shell, read-only", chromedp.Navigate(dashboard+"services/hello"),
		clickLive(`tr[data-replica^="hello-"] a[href^="/ui/replicas/hello-"]`),
		clickLive(`#shell-link`), chromedp.WaitVisible(`#terminal`))
	waitContains(t, tab, `#shell-status[data-state="refused"]`, "a read-only token may only read")
	shell := value(t, tab, "the shell's address", chromedp.Location())
	admin, err := os.ReadFile(filepath.Join(dir, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	run(t, tab, "sign out", chromedp.Submit(`header form button`), chromedp.WaitVisible("#token"))
	run(t, tab, "sign in as an admin", chromedp.SendKeys("#token", strings.TrimSpace(string(admin))), chromedp.Submit("#token"), chromedp.WaitVisible("main"))
	run(t, tab, "a replica's shell, admin", chromedp.Navigate(shell), chromedp.WaitVisible(`#shell-status[data-state="open"]`))
	run(t, tab, "type into the shell", chromedp.Evaluate[chromedp.Void](`void gantryTerminal.paste("echo gantry-$((6*7))\n")`))
	waitContains(t, tab, `.xterm-rows`, "gantry-42")
	keepScreenshot(t, tab, "dashboard-shell.png")
}

// startDev runs `gantry dev` on the hello example and returns the
// dashboard URL it prints.
func startDev(t *testing.T, dir string) string {
	t.Helper()
	return dashboardOf(t, runDev(t, dir, "../examples/hello.yaml"))
}

// dashboardOf waits for the dashboard URL dev prints among its lines,
// then keeps the rest drained.
func dashboardOf(t *testing.T, lines <-chan string) string {
	t.Helper()
	deadline := time.After(waitLimit)
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatal("gantry dev exited before printing its dashboard")
			}
			if rest, found := strings.CutPrefix(line, "gantry dev: dashboard "); found {
				go func() {
					for range lines { // keep dev's stdout drained
					}
				}()
				return strings.Fields(rest)[0]
			}
		case <-deadline:
			t.Fatal("gantry dev printed no dashboard URL")
		}
	}
}

// runDev runs `gantry dev -f spec` on dir until the test ends (then
// Ctrl-C, and no machine left), and returns its output's lines.
func runDev(t *testing.T, dir, spec string) <-chan string {
	t.Helper()
	return runDevIn(t, "", dir, spec)
}

// runDevIn is runDev from the working directory cwd ("": this one), where
// a relative dir is, as `gantry dev`'s default .gantry is.
func runDevIn(t *testing.T, cwd, dir, spec string) <-chan string {
	t.Helper()
	return runDevArgs(t, cwd, dir, "--history-interval", "1s", "-f", spec)
}

// runDevArgs runs `gantry dev --data-dir dir` with args from cwd, as
// runDevIn does.
func runDevArgs(t *testing.T, cwd, dir string, args ...string) <-chan string {
	t.Helper()
	cmd := gantryCommand(append([]string{"dev", "--data-dir", dir, "--listen", "127.0.0.1:0"}, args...)...)
	cmd.Dir = cwd
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(waitLimit):
			_ = cmd.Process.Kill()
		}
		killMachines(filepath.Join(cwd, dir))
	})
	return linesOf(stdout)
}

func signIn(t *testing.T, tab context.Context, dashboard, token string) {
	t.Helper()
	run(t, tab, "a wrong token is refused", chromedp.Navigate(dashboard), chromedp.WaitVisible("#token"),
		chromedp.SendKeys("#token", "not-a-token"), chromedp.Submit("#token"), chromedp.WaitVisible(".error"))
	wrong := value(t, tab, "the sign-in error", chromedp.Text(".error"))
	if !strings.Contains(wrong, "token") {
		t.Fatalf("a wrong token: %q", wrong)
	}
	run(t, tab, "sign in", chromedp.SendKeys("#token", token), chromedp.Submit("#token"), chromedp.WaitVisible("main#view"))
	location := value(t, tab, "where sign-in leads", chromedp.Location())
	if strings.Contains(location, token) {
		t.Fatal("the token is in the URL")
	}
}

func run(t *testing.T, tab context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, waitLimit)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func value[T any](t *testing.T, tab context.Context, what string, action chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, waitLimit)
	defer cancel()
	v, err := chromedp.Run(ctx, action)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// clickLive waits for an element, then clicks the one the selector
// matches at the moment of the click. The live pages re-render: a
// chromedp.Click between its query and its click can be left holding a
// node that is gone ("Could not find node with given id").
func clickLive(selector string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(
		chromedp.WaitVisible(chromedp.CSS(selector)),
		chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`void document.querySelector(%q).click()`, selector)),
	)
}

// markPage tags the loaded document: a reload would lose the tag.
func markPage() chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](`void (window.gantryLoaded = "once")`)
}

func assertNotReloaded(t *testing.T, tab context.Context) {
	t.Helper()
	mark := value(t, tab, "read the page's tag", chromedp.Evaluate[string](`window.gantryLoaded || "reloaded"`))
	if mark != "once" {
		t.Fatal("the page was reloaded: live updates must arrive without one")
	}
}

// waitContains polls the page until selector's text contains want.
func waitContains(t *testing.T, tab context.Context, selector, want string) {
	t.Helper()
	waitTextMatches(t, tab, selector, "contains "+want, func(got string) bool { return strings.Contains(got, want) })
}

// waitText polls the page (not the server) until selector's text is want.
func waitText(t *testing.T, tab context.Context, selector, want string) {
	t.Helper()
	waitTextMatches(t, tab, selector, "shows "+want, func(got string) bool { return got == want })
}

// waitTextMatches polls the page until selector's trimmed text matches.
func waitTextMatches(t *testing.T, tab context.Context, selector, what string, matches func(string) bool) {
	t.Helper()
	waitFor(t, selector+" "+what, func() (bool, string) {
		ctx, cancel := context.WithTimeout(tab, 5*time.Second)
		defer cancel()
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(document.querySelector(`+jsString(selector)+`)||{}).textContent || ""`))
		got = strings.TrimSpace(got)
		return err == nil && matches(got), "shows " + got
	})
}

func waitCount(t *testing.T, tab context.Context, selector string, want int) {
	t.Helper()
	waitFor(t, itoa(want)+" of "+selector, func() (bool, string) {
		ctx, cancel := context.WithTimeout(tab, 5*time.Second)
		defer cancel()
		got, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll(`+jsString(selector)+`).length`))
		return err == nil && got >= want, "found " + itoa(got)
	})
}

func jsString(s string) string { return "'" + strings.ReplaceAll(s, "'", `\'`) + "'" }

func keepScreenshot(t *testing.T, tab context.Context, name string) {
	t.Helper()
	png := value(t, tab, "screenshot "+name, chromedp.FullScreenshot(100))
	browser.Keep(t, name, png)
}

func readExample(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../examples/hello.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
