package agent

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/runtime"
)

// probe runs one health check against a replica's task: HTTP and TCP dial
// the task's endpoint for the port, exec runs where the task runs (inside
// its container).
func probe(ctx context.Context, hc *api.HealthCheck, task runtime.Task) error {
	timeout := time.Duration(hc.TimeoutSeconds) * time.Second
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	switch {
	case hc.HTTP != nil:
		addr, ok := task.Endpoint(hc.HTTP.Port)
		if !ok {
			return fmt.Errorf("no endpoint for port %q", hc.HTTP.Port)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+hc.HTTP.Path, nil)
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
		addr, ok := task.Endpoint(hc.TCP.Port)
		if !ok {
			return fmt.Errorf("no endpoint for port %q", hc.TCP.Port)
		}
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		return conn.Close()
	case hc.Exec != nil:
		return task.Exec(ctx, hc.Exec.Command)
	}
	return nil
}
