package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// The README's two-services example: in `gantry dev` (host network
// mode), web's replicas find api's by name through their machine's
// agent ($GANTRY_DNS) and call them; the name answers both api replicas
// over SRV, each with its port.
func TestDevServicesCallEachOtherByName(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	cmd := exec.Command(gantryBin, "dev", "--data-dir", dir, "--listen", "127.0.0.1:0", "-f", "../examples/two-services.yaml")
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
		killMachines(dir)
	})
	lines := linesOf(stdout)
	nameLine := regexp.MustCompile(`^Name api\.dev\.gantry\. answered at (\S+) `)
	var webURLs []string
	resolver := ""
	var transcript strings.Builder
	deadline := time.After(waitLimit)
	for resolver == "" {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("gantry dev exited early:\n%s", transcript.String())
			}
			transcript.WriteString(line + "\n")
			if strings.HasPrefix(line, "web-") {
				fields := strings.Fields(line)
				webURLs = append(webURLs, fields[len(fields)-1])
			}
			if m := nameLine.FindStringSubmatch(line); m != nil {
				resolver = m[1]
			}
		case <-deadline:
			t.Fatalf("no name printed:\n%s", transcript.String())
		}
	}
	go func() {
		for range lines { // keep gantry dev's output flowing
		}
	}()
	if len(webURLs) != 2 {
		t.Fatalf("web URLs %v, want 2:\n%s", webURLs, transcript.String())
	}
	waitFor(t, "api's name answering both replicas", func() (bool, string) {
		m := new(dns.Msg)
		m.SetQuestion("_http._tcp.api.dev.gantry.", dns.TypeSRV)
		resp, _, err := (&dns.Client{Timeout: 2 * time.Second}).Exchange(m, resolver)
		if err != nil {
			return false, err.Error()
		}
		if len(resp.Answer) != 2 || len(resp.Extra) != 2 {
			return false, resp.String()
		}
		return true, ""
	})
	for _, u := range webURLs {
		waitFor(t, "web calling api by name from "+u, func() (bool, string) {
			body, ok := get(u + "/call")
			return ok && strings.Contains(body, "called api.dev.gantry.") && strings.Contains(body, "api here"), body
		})
	}
}
