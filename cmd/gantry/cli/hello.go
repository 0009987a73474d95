package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"
)

// newHelloCmd is the tiny HTTP service of the examples, so `gantry dev`
// needs no image and nothing but this binary.
func newHelloCmd(g *globals) *cobra.Command {
	var listen string
	cmd := &cobra.Command{
		Use:    "hello",
		Short:  "Serve a greeting over HTTP on $PORT (the examples' workload)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if listen == "" {
				port := os.Getenv("PORT")
				if port == "" {
					return errors.New("PORT is not set")
				}
				listen = net.JoinHostPort("0.0.0.0", port)
			}
			greeting := os.Getenv("GREETING")
			if file := os.Getenv("GREETING_FILE"); file != "" {
				// A secret greeting, as the docker runtime gives secrets.
				data, err := os.ReadFile(file)
				if err != nil {
					return fmt.Errorf("GREETING_FILE: %w", err)
				}
				greeting = string(data)
			}
			if greeting == "" {
				greeting = "hello"
			}
			mux := http.NewServeMux()
			mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
			if call := os.Getenv("CALL"); call != "" {
				mux.HandleFunc("GET /call", func(w http.ResponseWriter, r *http.Request) { callByName(w, r, call) })
			}
			if egress := os.Getenv("EGRESS"); egress != "" {
				mux.HandleFunc("GET /egress", func(w http.ResponseWriter, r *http.Request) { relay(w, r, egress) })
			}
			mux.HandleFunc("GET /", func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprintf(w, "%s (replica %s on machine %s)\n", greeting, os.Getenv("GANTRY_REPLICA"), os.Getenv("GANTRY_MACHINE"))
			})
			srv := &http.Server{Addr: listen, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
			go func() {
				<-cmd.Context().Done()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = srv.Shutdown(ctx)
			}()
			fmt.Fprintf(g.out, "hello listening on %s\n", listen)
			if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "", "address to listen on (default 0.0.0.0:$PORT)")
	return cmd
}

// callByName finds a serving replica of the service named name (its
// port http, by SRV at the resolver in $GANTRY_DNS) and relays its
// answer: the examples' service-to-service call.
func callByName(w http.ResponseWriter, r *http.Request, name string) {
	dns := os.Getenv("GANTRY_DNS")
	if dns == "" {
		http.Error(w, "GANTRY_DNS is not set: this machine's agent answers no names", http.StatusServiceUnavailable)
		return
	}
	resolver := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, dns)
	}}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	_, targets, err := resolver.LookupSRV(ctx, "http", "tcp", name)
	if err != nil || len(targets) == 0 {
		http.Error(w, fmt.Sprintf("no serving replica of %s: %v", name, err), http.StatusServiceUnavailable)
		return
	}
	target := targets[rand.IntN(len(targets))]
	addrs, err := resolver.LookupHost(ctx, target.Target)
	if err != nil || len(addrs) == 0 {
		http.Error(w, fmt.Sprintf("address of %s: %v", target.Target, err), http.StatusServiceUnavailable)
		return
	}
	url := "http://" + net.JoinHostPort(addrs[0], strconv.Itoa(int(target.Port))) + "/"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		http.Error(w, fmt.Sprintf("call %s at %s: %v", name, url, err), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	fmt.Fprintf(w, "%s (replica %s) called %s at %s: %s", os.Getenv("GANTRY_SERVICE"), os.Getenv("GANTRY_REPLICA"), name, url, body)
}

// relay answers with what url answers: a replica's call beyond its
// cluster (the overlay's masquerade).
func relay(w http.ResponseWriter, r *http.Request, url string) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		http.Error(w, "EGRESS: "+err.Error(), http.StatusInternalServerError)
		return
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		http.Error(w, fmt.Sprintf("call %s: %v", url, err), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	fmt.Fprintf(w, "%s (replica %s) called %s: %s", os.Getenv("GANTRY_SERVICE"), os.Getenv("GANTRY_REPLICA"), url, body)
}
