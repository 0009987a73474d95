package agent

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"time"

	"github.com/gantry-dev/gantry/api"
)

// probe runs one health check against a replica on this machine.
func probe(ctx context.Context, hc *api.HealthCheck, hostPorts map[string]int) error {
	timeout := time.Duration(hc.TimeoutSeconds) * time.Second
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	switch {
	case hc.HTTP != nil:
		url := fmt.Sprintf("http://127.0.0.1:%d%s", hostPorts[hc.HTTP.Port], hc.HTTP.Path)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode < 200 || resp.StatusCode >= 400 {
			return fmt.Errorf("GET %s: HTTP %d", hc.HTTP.Path, resp.StatusCode)
		}
		return nil
	case hc.TCP != nil:
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(hostPorts[hc.TCP.Port])))
		if err != nil {
			return err
		}
		return conn.Close()
	case hc.Exec != nil:
		return exec.CommandContext(ctx, hc.Exec.Command[0], hc.Exec.Command[1:]...).Run()
	}
	return nil
}
