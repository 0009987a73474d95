package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
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
