package cli

import (
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/gantry-dev/gantry/decide/settings"
	"github.com/gantry-dev/gantry/provider/clouds"
	dockerrt "github.com/gantry-dev/gantry/runtime/docker"
	"github.com/gantry-dev/gantry/server"
	"github.com/gantry-dev/gantry/target/kube"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/klog/v2"
)

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	var log *slog.Logger
	switch format {
	case "text":
		log = slog.New(slog.NewTextHandler(w, opts))
	case "json":
		log = slog.New(slog.NewJSONHandler(w, opts))
	default:
		return nil, fmt.Errorf("--log-format %q: want text or json", format)
	}
	// client-go (the Kubernetes target) logs through klog, a process-wide
	// logger: its lines join ours instead of going to stderr as they like.
	klog.SetSlogLogger(log.With("component", "client-go"))
	return log, nil
}

// serverFlags binds every server knob to a flag, defaults from cfg; the
// cloud endpoints go to cloudCfg (see withClouds).
func serverFlags(fs *pflag.FlagSet, cfg *server.Config, cloudCfg *clouds.Config) {
	fs.StringVar(&cloudCfg.AWSEndpoint, "aws-endpoint", "", "aws provider: EC2 endpoint override (default: the region's)")
	fs.StringVar(&cloudCfg.GCPEndpoint, "gcp-endpoint", "", "gcp provider: Compute Engine endpoint override")
	fs.BoolVar(&cloudCfg.GCPNoAuth, "gcp-no-auth", false, "gcp provider: send no credentials (for an emulator)")
	fs.StringVar(&cfg.Listen, "listen", cfg.Listen, "address of the HTTP API")
	fs.StringVar(&cfg.TLS.CertFile, "tls-cert", "", "server certificate and chain, PEM (default: one signed by a CA generated on first start, kept in the store)")
	fs.StringVar(&cfg.TLS.KeyFile, "tls-key", "", "private key of --tls-cert, PEM")
	fs.StringSliceVar(&cfg.TLS.SANs, "tls-san", nil, "extra names or addresses the generated certificate covers (it covers localhost, the listen, advertised and agent server addresses)")
	fs.DurationVar(&cfg.TLS.CertValidity, "tls-cert-validity", cfg.TLS.CertValidity, "lifetime of a generated server certificate (issued again at start a month before it ends)")
	fs.StringVar(&cfg.Store.URL, "store", "", "PostgreSQL URL (postgres://user:pass@host:port/db) that several servers share; default: SQLite in the data dir, one server")
	fs.StringSliceVar(&cfg.AgentServers, "agent-servers", nil, "URLs of every server sharing --store, given to agents so they move to another when theirs stops answering (default: the advertised URL)")
	fs.StringVar(&cfg.PprofListen, "pprof-listen", "", "serve Go's profiler on this address (for measuring; keep it on loopback)")
	fs.StringVar(&cfg.Telemetry.Endpoint, "otlp-endpoint", "", "OTLP/HTTP collector (http://host:4318) the server sends its traces and metrics to (default: the OTEL_EXPORTER_OTLP_* variables; none: no export)")
	fs.DurationVar(&cfg.Telemetry.MetricInterval, "otlp-metric-interval", cfg.Telemetry.MetricInterval, "how often the server's metrics are sent over OTLP")
	fs.Int64Var(&cfg.Simulate.MaxTraceBytes, "max-trace-bytes", cfg.Simulate.MaxTraceBytes, "largest demand trace kept for simulations")
	fs.IntVar(&cfg.Simulate.MaxTraces, "max-traces", cfg.Simulate.MaxTraces, "most demand traces kept for simulations")
	fs.DurationVar(&cfg.Simulate.MaxSpan, "max-trace-span", cfg.Simulate.MaxSpan, "longest a kept trace may last, first row to last")
	fs.IntVar(&cfg.Simulate.MaxPolicies, "max-simulation-policies", cfg.Simulate.MaxPolicies, "most policies one simulation compares")
	fs.DurationVar(&cfg.Simulate.Timeout, "simulate-timeout", cfg.Simulate.Timeout, "longest a simulation runs before it is given up (one runs at a time)")
	fs.DurationVar(&cfg.UI.LiveInterval, "ui-live-interval", cfg.UI.LiveInterval, "how often a dashboard page open in a browser is read again for changes")
	fs.StringVar(&cfg.Name, "name", "", "this server's name in the leader lease (default: drawn at start)")
	fs.DurationVar(&cfg.Leader.LeaseDuration, "lease-duration", cfg.Leader.LeaseDuration, "with --store: how long a leader's term lasts unless renewed")
	fs.DurationVar(&cfg.Leader.RenewDeadline, "lease-renew-deadline", cfg.Leader.RenewDeadline, "with --store: the leader steps down this long after its last renewal began")
	fs.DurationVar(&cfg.Leader.RetryPeriod, "lease-retry-period", cfg.Leader.RetryPeriod, "with --store: time between renewals and between attempts to lead")
	fs.StringVar(&cfg.AdvertiseURL, "advertise-url", "", "URL agents use to reach the server (default: the listen address)")
	fs.DurationVar(&cfg.BodyReadTimeout, "body-read-timeout", cfg.BodyReadTimeout, "longest time to read a request body")
	fs.Int64Var(&cfg.MaxRequestBytes, "max-request-bytes", cfg.MaxRequestBytes, "largest accepted request body")
	settings.Bind(fs, &cfg.Controller.Decide)
	fs.DurationVar(&cfg.Controller.Interval, "reconcile-interval", cfg.Controller.Interval, "time from a control loop pass to the next when nothing triggers one sooner (a change triggers a pass at once)")
	fs.DurationVar(&cfg.Controller.FullPassInterval, "full-pass-interval", cfg.Controller.FullPassInterval, "passes are skipped while nothing they decide from changes; at least this often one runs in full anyway, a safety net that must find nothing (0: every pass in full)")
	fs.IntVar(&cfg.Controller.PlacementBatch, "placement-batch", cfg.Controller.PlacementBatch, "replicas made, placed or evicted per transaction of the control loop's act, after its other writes (0: all of a pass in one)")
	fs.Float64Var(&cfg.Controller.MaxDutyCycle, "max-loop-duty-cycle", cfg.Controller.MaxDutyCycle, "largest share of time the control loop spends in passes; it rests in between")
	fs.DurationVar(&cfg.Controller.DutyWindow, "loop-duty-window", cfg.Controller.DutyWindow, "window the loop's duty cycle holds over: an idle loop passes at once, a burst gets passes back to back for up to the duty cycle times this (0: rest after every pass)")
	fs.DurationVar(&cfg.Controller.MaxRest, "max-loop-rest", cfg.Controller.MaxRest, "longest rest of the control loop between passes, however long the last pass took (0: no cap)")
	fs.Float64Var(&cfg.RateLimits.MutatingRate, "mutating-rate", cfg.RateLimits.MutatingRate, "mutating calls per second each token (each address, for joins) may make; 0: no limit")
	fs.IntVar(&cfg.RateLimits.MutatingBurst, "mutating-burst", cfg.RateLimits.MutatingBurst, "burst above --mutating-rate")
	fs.Float64Var(&cfg.RateLimits.AuthFailureRate, "auth-failure-rate", cfg.RateLimits.AuthFailureRate, "failed authentications per second each client address may make past --auth-failure-burst; 0: no limit")
	fs.IntVar(&cfg.RateLimits.AuthFailureBurst, "auth-failure-burst", cfg.RateLimits.AuthFailureBurst, "failed authentications a client address may make at once")
	fs.IntVar(&cfg.RateLimits.Callers, "rate-limit-callers", cfg.RateLimits.Callers, "callers (tokens, addresses) each rate limit remembers at once; the least recently seen are forgotten first")
	fs.DurationVar(&cfg.CredentialCacheTTL, "credential-cache-ttl", cfg.CredentialCacheTTL, "how long a verified machine credential is accepted without reading the store again")
	fs.DurationVar(&cfg.History.Interval, "history-interval", cfg.History.Interval, "how often the fleet is sampled for the dashboard's charts (GET /v1/history)")
	fs.IntVar(&cfg.History.Length, "history-length", cfg.History.Length, "how many samples of the fleet each server keeps in memory (the oldest go first)")
	fs.DurationVar(&cfg.HeartbeatFlushInterval, "heartbeat-flush-interval", cfg.HeartbeatFlushInterval, "how often heartbeats kept in memory are written to the store, in one batch")
	fs.IntVar(&cfg.HeartbeatsPerLease, "heartbeats-per-lease", cfg.HeartbeatsPerLease, "heartbeats per failover lease of a machine running a failover member (its primary renews the lease with them)")
	fs.DurationVar(&cfg.Controller.Calls.JoinTokenTTL, "join-token-ttl", cfg.Controller.Calls.JoinTokenTTL, "validity of a launched machine's join token")
	fs.DurationVar(&cfg.Controller.Calls.ProviderTimeout, "provider-timeout", cfg.Controller.Calls.ProviderTimeout, "timeout of one provider call")
	fs.IntVar(&cfg.Controller.Calls.Concurrency, "provider-concurrency", cfg.Controller.Calls.Concurrency, "provider calls at once per provider instance")
	fs.DurationVar(&cfg.LocalStopGrace, "local-stop-grace", cfg.LocalStopGrace, "local provider: time an agent has to stop before SIGKILL")
	fs.BoolVar(&cfg.LocalExitWithServer, "local-exit-with-server", cfg.LocalExitWithServer, "local provider: machines die with the server process")
	fs.StringVar(&cfg.LocalNetnsBridge, "local-netns-bridge", "", "local provider: run each machine in a network namespace of its own on this bridge of the host (it holds --local-netns-cidr's first address; root only)")
	fs.StringVar(&cfg.LocalNetnsCIDR, "local-netns-cidr", "", "local provider: the machines' subnet on --local-netns-bridge")
	fs.StringVar(&cfg.LocalRuntime, "local-runtime", cfg.LocalRuntime, "local provider: runtime of its agents, process or docker")
	fs.StringVar(&cfg.Docker.Network, "docker-network", cfg.Docker.Network, "docker provider: bridge network of machines and replicas")
	fs.StringVar(&cfg.Docker.Image, "docker-image", cfg.Docker.Image, "docker provider: machine image, built from this binary when missing or stale")
	fs.StringVar(&cfg.Docker.HAProxy, "docker-haproxy", dockerrt.HostHAProxy(), "docker provider: this host's HAProxy, put in the machine image for edge machines (empty: none)")
	fs.StringVar(&cfg.Docker.ServerURL, "docker-server-url", "", "docker provider: URL machines dial (default: the advertised URL, loopback replaced by the network gateway)")
	fs.StringVar(&cfg.ExecConfig, "exec-config", "", "exec provider: settings file (commands, instance types, prices; see docs/providers.md)")
	fs.DurationVar(&cfg.Docker.StopGrace, "docker-stop-grace", cfg.Docker.StopGrace, "docker provider: time a machine's agent has to stop its replicas")
}

func newServerCmd(g *globals) *cobra.Command {
	cfg := server.DefaultConfig("")
	var cloudCfg clouds.Config
	var logFormat, logLevel string
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run the control plane: HTTP API, store and control loops",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			log, err := newLogger(os.Stderr, logFormat, logLevel)
			if err != nil {
				return err
			}
			cfg.DataDir = g.dataDir
			cfg.Store.SQLite = server.DefaultConfig(g.dataDir).Store.SQLite
			cfg.AdminToken = os.Getenv("GANTRY_ADMIN_TOKEN")
			cfg.EncryptionKey = os.Getenv("GANTRY_ENCRYPTION_KEY")
			cfg.Providers = clouds.New(cloudCfg).Entries()
			cfg.Kubernetes = kube.Factory(kube.DefaultConfig())
			srv, err := server.New(cmd.Context(), cfg, log)
			if err != nil {
				return err
			}
			defer srv.Close()
			fmt.Fprintf(g.errOut, "gantry server on %s (admin token in %s", srv.URL(), srv.AdminTokenPath())
			if !cfg.TLS.Disabled {
				fmt.Fprintf(g.errOut, ", CA certificate in %s", server.CACertPath(cfg.DataDir))
			}
			fmt.Fprintln(g.errOut, ")")
			return srv.Run(cmd.Context())
		},
	}
	serverFlags(cmd.Flags(), &cfg, &cloudCfg)
	cmd.Flags().BoolVar(&cfg.TLS.Disabled, "plain-http", false, "serve plain HTTP (only behind a proxy that terminates TLS, or on loopback)")
	cmd.Flags().StringVar(&logFormat, "log-format", "text", "log format: text or json")
	cmd.Flags().StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn or error")
	return cmd
}
