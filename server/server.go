// Package server is `gantry server`: the HTTP API under /v1, the store,
// the providers and the control loop, assembled.
package server

import (
	"cmp"
	"context"
	"crypto/tls"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/auth"
	"github.com/gantry-dev/gantry/controller"
	"github.com/gantry-dev/gantry/internal/ratelimit"
	"github.com/gantry-dev/gantry/internal/version"
	"github.com/gantry-dev/gantry/leader"
	"github.com/gantry-dev/gantry/metrics"
	dockerprovider "github.com/gantry-dev/gantry/provider/docker"
	"github.com/gantry-dev/gantry/provider/local"
	"github.com/gantry-dev/gantry/provider/registry"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/replica/ingest"
	"github.com/gantry-dev/gantry/server/heartbeat"
	"github.com/gantry-dev/gantry/server/names"
	"github.com/gantry-dev/gantry/server/relay"
	"github.com/gantry-dev/gantry/store"
	"github.com/gantry-dev/gantry/store/postgres"
	"github.com/gantry-dev/gantry/store/sqlite"
	"github.com/gantry-dev/gantry/store/view"
	"github.com/gantry-dev/gantry/target"
	"github.com/gantry-dev/gantry/telemetry"
	"github.com/gantry-dev/gantry/ui"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/utils/clock"
)

// handleHealth is 200 while the store answers and accepts writes, 503
// with the store's error while it does not; it says whether this server
// leads. The store is asked (a bounded read, kept for HealthPing.Cache so
// that callers of this public path cannot load it): a server whose writes
// last succeeded may have lost its database since.
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	v := version.Get()
	body := api.ServerHealth{Status: "ok", Server: s.elector.Holder(), Leader: s.elector.Leading(), Version: v.Version, Commit: v.Commit}
	status := http.StatusOK
	if h := s.store.Health(); !h.Healthy {
		status = http.StatusServiceUnavailable
		body.Status, body.Error, body.Since = "store-unavailable", h.Error, h.Since.UTC().Format(time.RFC3339)
	} else if err := s.ping.check(r.Context(), s.store, s.clock.Now()); err != nil {
		status = http.StatusServiceUnavailable
		body.Status, body.Error = "store-unreachable", err.Error()
	}
	writeJSON(w, status, body)
}

// HealthPing bounds /healthz's read of the store.
type HealthPing struct {
	// Timeout is the longest the read may take before the store counts
	// as unreachable.
	Timeout time.Duration
	// Cache is how long an answer is reused.
	Cache time.Duration
}

type storePing struct {
	cfg    HealthPing
	mu     sync.Mutex
	at     time.Time
	result error
}

func (p *storePing) check(ctx context.Context, st store.Store, now time.Time) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.at.IsZero() && now.Sub(p.at) < p.cfg.Cache && now.After(p.at) {
		return p.result
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.Timeout)
	defer cancel()
	err := st.View(ctx, func(tx store.Tx) error {
		_, err := tx.GetMeta("healthz")
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		return err
	})
	if err != nil {
		err = fmt.Errorf("store did not answer a read within %s: %w", p.cfg.Timeout, err)
	}
	p.at, p.result = now, err
	return err
}

// OpenAPI is the API's description, served at /v1/openapi.json.
//
//go:embed openapi.json
var OpenAPI []byte

// Config is everything `gantry server` can be told.
type Config struct {
	// Listen is the address of the HTTP API ("127.0.0.1:0" picks a port).
	Listen string
	// DataDir holds the database, the admin token and provider state.
	DataDir string
	// AdminToken; generated into DataDir/admin-token (mode 0600) if empty.
	AdminToken string
	// EncryptionKey (64 hex digits) seals the server's secrets in the
	// store; generated into DataDir/encryption-key (mode 0600) if empty.
	EncryptionKey string
	// AdvertiseURL is the URL agents dial; defaults to the listen address.
	AdvertiseURL string
	// AgentServers are the URLs of every server sharing the store, given
	// to agents (at launch, join and heartbeat) so that they move to
	// another when theirs stops answering. Empty: this server's
	// advertised URL alone, and agents keep the URL they were given.
	AgentServers []string
	// MaxRequestBytes bounds request bodies.
	MaxRequestBytes int64
	// LogPollWait is the longest an agent's poll for log requests is held;
	// LogAttachTimeout the longest `gantry logs` waits for the agent.
	LogPollWait      time.Duration
	LogAttachTimeout time.Duration
	// UsageTTL is how long a machine's last reported usage is shown
	// (gantry top); PeerTimeout bounds a call to another server (for
	// what machines reported to it).
	UsageTTL    time.Duration
	PeerTimeout time.Duration
	// Names tunes how agents learn their cluster's DNS names.
	Names names.Config
	// Watch tunes the change feed's watches.
	Watch WatchConfig
	// View tunes the server's view of the store (quiet heartbeats are
	// answered from it; the leader's passes read it).
	View ViewConfig
	// RateLimits bound mutating calls per caller and failed
	// authentications per address.
	RateLimits RateLimits
	// CredentialCacheTTL is how long a verified machine credential is
	// accepted without reading the store again (0: always read).
	CredentialCacheTTL time.Duration
	// HeartbeatFlushInterval is how often the heartbeats kept in memory
	// are written to the store, in one batch.
	HeartbeatFlushInterval time.Duration
	// HeartbeatsPerLease is how often a machine running a failover member
	// heartbeats, per lease of its group: its primary's lease is renewed
	// with them, and a replica learns a promotion from them.
	HeartbeatsPerLease int
	// HealthPing bounds the store read /healthz makes.
	HealthPing HealthPing
	// ReadHeaderTimeout and ShutdownTimeout of the HTTP server.
	ReadHeaderTimeout time.Duration
	// BodyReadTimeout bounds reading a request's body. IdleTimeout closes
	// kept-alive connections that carry nothing.
	BodyReadTimeout time.Duration
	IdleTimeout     time.Duration
	ShutdownTimeout time.Duration
	// Controller: its Calls.ServerURL and InstallationID are filled in by
	// the server.
	Controller controller.Config
	// WrapProvider, when set, wraps every provider (tests inject faults).
	WrapProvider func(provisioner.Provisioner) provisioner.Provisioner
	// Providers are registered beside the built-in ones (the clouds, from
	// provider/clouds; fakes in tests).
	Providers []registry.Entry
	// LocalAgentBinary is what local machines run (default: this binary).
	LocalAgentBinary string
	// Local provider settings.
	LocalStopGrace      time.Duration
	LocalExitWithServer bool
	LocalAgentArgs      []string
	// LocalNetnsBridge and LocalNetnsCIDR put each local machine in a
	// network namespace of its own on that bridge (which holds the
	// prefix's first address); empty: machines share the host's network.
	LocalNetnsBridge string
	LocalNetnsCIDR   string
	// LocalRuntime is the runtime local machines' agents use: process, or
	// docker for containers on this host's engine.
	LocalRuntime string
	// Docker provider settings; its StateDir defaults to DataDir/docker.
	Docker dockerprovider.Config
	// ExecConfig is the exec provider's settings file (none: no exec
	// provider).
	ExecConfig string
	Store      StoreConfig
	// TLS is how the API is served: HTTPS unless disabled.
	TLS TLSConfig
	// Leader tunes the election among servers sharing a PostgreSQL store.
	Leader leader.Config
	// Name is this server in the leader lease (default: drawn).
	Name string
	// WrapStore, when set, wraps the store (tests inject failures).
	WrapStore func(store.Store) store.Store
	// Clock is the server's time (tests step a fake one).
	Clock clock.WithTicker
	// Kubernetes builds the target that runs the Kubernetes clusters'
	// replicas (kube.Factory); without it the server watches none and
	// answers their logs with target.ErrNoKubernetes.
	Kubernetes target.NewKubernetes
	// PprofListen, when set, serves Go's profiler (net/http/pprof) on
	// this address, apart from the API: for measuring, never exposed.
	PprofListen string
	// CostPlanTTL is how long the cost view's plan from scratch is kept
	// before it is computed again.
	CostPlanTTL time.Duration
	// UI tunes the web dashboard at /ui.
	UI ui.Config
	// Simulate bounds the simulations the API and dashboard run.
	Simulate SimulateConfig
	// History tunes the samples of the fleet kept for the dashboard's
	// charts.
	History HistoryConfig
	// Telemetry is where the server sends its traces and metrics over
	// OTLP (nowhere unless set or OTEL_EXPORTER_OTLP_* say).
	Telemetry telemetry.ServerConfig
}

// DefaultConfig returns defaults for a data directory.
func DefaultConfig(dataDir string) Config {
	return Config{
		Listen: "127.0.0.1:7400", DataDir: dataDir, MaxRequestBytes: 1 << 20,
		HeartbeatFlushInterval: time.Second, HeartbeatsPerLease: 4, CredentialCacheTTL: 5 * time.Minute,
		ReadHeaderTimeout: 10 * time.Second, BodyReadTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute, ShutdownTimeout: 15 * time.Second, LogPollWait: 25 * time.Second, LogAttachTimeout: 15 * time.Second, UsageTTL: time.Minute, PeerTimeout: 5 * time.Second,
		RateLimits:     DefaultRateLimits(),
		Names:          names.DefaultConfig(),
		Watch:          DefaultWatchConfig(),
		View:           ViewConfig{Resync: 10 * time.Second},
		HealthPing:     HealthPing{Timeout: 2 * time.Second, Cache: time.Second},
		Controller:     controller.DefaultConfig(),
		LocalStopGrace: 10 * time.Second, LocalRuntime: "process",
		Docker:      dockerprovider.DefaultConfig(""),
		Store:       StoreConfig{SQLite: sqlite.DefaultConfig(filepath.Join(dataDir, "gantry.db")), Postgres: postgres.DefaultConfig("")},
		Leader:      leader.DefaultConfig(),
		TLS:         DefaultTLSConfig(),
		Clock:       clock.RealClock{},
		CostPlanTTL: 15 * time.Second,
		Simulate:    DefaultSimulateConfig(),
		UI:          ui.DefaultConfig(),
		History:     DefaultHistoryConfig(),
		Telemetry:   telemetry.ServerConfig{MetricInterval: 30 * time.Second},
	}
}

// Server is a running control plane.
type Server struct {
	cfg        Config
	log        *slog.Logger
	clock      clock.WithTicker
	store      *store.Monitor
	startedAt  time.Time
	signer     *auth.Signer
	sealer     *auth.Sealer
	adminToken string
	registry   *registry.Registry
	lock       *dataDirLock
	elector    *leader.Elector
	ready      chan struct{}
	// simulating holds the simulation running, if one is.
	simulating chan struct{}
	local      *local.Provider
	ctrl       *controller.Controller
	// fenced is the store as the leader writes it: refused once this
	// server no longer leads.
	fenced store.Store
	// kube runs the Kubernetes clusters' watches while this server leads.
	kube     target.Kubernetes
	listener net.Listener
	url      string
	// tls is nil when the API is plain HTTP.
	tls *serverTLS
	// advertise is the URL other servers and agents reach this one at.
	advertise string
	http      *http.Server
	logs      *relay.Logs
	streams   *relay.Streams
	usage     *usageCache
	history   *history
	names     *names.Hub
	// wakes tell agents their assignments changed.
	wakes *assignmentWakes
	// view is the store as the change feed says (shared with the
	// controller), kept current by follower.
	view     *view.View
	follower *view.Follower
	statuses ingest.Sink
	// beats batches quiet heartbeats; ingest takes heartbeats.
	beats  *heartbeat.Beats
	ingest *heartbeat.Ingester
	// credentials are machine credentials verified lately.
	credentials *credentialCache
	rates       *rateLimits
	ping        *storePing
	promReg     *prometheus.Registry
	metrics     *metrics.Metrics
	scratch     scratchPlan
	otel        *telemetry.Server
	// stopping ends the agents' long polls when the server shuts down.
	stopping context.Context
	stop     context.CancelFunc
}

// New opens the store, prepares secrets and providers, and listens.
func New(ctx context.Context, cfg Config, log *slog.Logger) (*Server, error) {
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir %s: %w", cfg.DataDir, err)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if err := cfg.Leader.Validate(); err != nil {
		return nil, err
	}
	if cfg.History.Interval <= 0 || cfg.History.Length < 1 {
		return nil, fmt.Errorf("history: interval and length must be positive (got %s, %d)", cfg.History.Interval, cfg.History.Length)
	}
	if err := cfg.Simulate.check(); err != nil {
		return nil, err
	}
	lock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	db, leases, err := openStore(ctx, cfg.Store, cfg.Clock.Now)
	if err != nil {
		lock.release()
		return nil, err
	}
	var st store.Store = db
	if cfg.WrapStore != nil {
		st = cfg.WrapStore(db)
	}
	s := &Server{cfg: cfg, log: log, clock: cfg.Clock, store: store.NewMonitor(st, cfg.Clock), startedAt: cfg.Clock.Now(), logs: relay.NewLogs(), streams: relay.NewStreams(), usage: newUsageCache(cfg.UsageTTL), statuses: ingest.Store{},
		credentials: newCredentialCache(cfg.CredentialCacheTTL), rates: newRateLimits(cfg.RateLimits), ping: &storePing{cfg: cfg.HealthPing}, lock: lock, ready: make(chan struct{}),
		history: &history{limit: cfg.History.Length}, simulating: make(chan struct{}, 1)}
	s.elector = leader.New(cfg.Leader, leases, cfg.Name, cfg.Clock, log)
	s.names = names.NewHub(cfg.Names, cfg.Clock.Now, s.clusterNames)
	s.wakes = newAssignmentWakes()
	s.stopping, s.stop = context.WithCancel(context.Background())
	if err := s.prepare(ctx); err != nil {
		st.Close()
		lock.release()
		return nil, err
	}
	return s, nil
}

func (s *Server) prepare(ctx context.Context) error {
	var err error
	if s.sealer, err = loadOrCreateEncryptionKey(s.cfg); err != nil {
		return err
	}
	key, err := s.sealedMetaOrCreate(ctx, "join-signing-key", auth.NewKey)
	if err != nil {
		return err
	}
	if s.signer, err = auth.NewSigner([]byte(key)); err != nil {
		return err
	}
	installation, err := s.metaOrCreate(ctx, "installation-id", func() string { return auth.NewKey()[:16] })
	if err != nil {
		return err
	}
	if s.adminToken, err = loadOrCreateAdminToken(s.cfg); err != nil {
		return err
	}
	if s.listener, err = net.Listen("tcp", s.cfg.Listen); err != nil {
		return fmt.Errorf("listen on %s: %w", s.cfg.Listen, err)
	}
	if s.tls, err = s.prepareTLS(ctx, s.listener); err != nil {
		s.listener.Close()
		return err
	}
	s.url = "http://" + s.listener.Addr().String()
	if s.tls != nil {
		s.listener = tls.NewListener(s.listener, s.tls.config)
		s.url = "https://" + s.listener.Addr().String()
		s.signer = s.signer.WithCAPin(s.tls.pin)
	}
	advertise := s.cfg.AdvertiseURL
	if advertise == "" {
		advertise = s.url
	}
	s.advertise = strings.TrimRight(advertise, "/")
	if err := os.WriteFile(filepath.Join(s.cfg.DataDir, "server.url"), []byte(s.url+"\n"), 0o600); err != nil {
		return fmt.Errorf("write server.url: %w", err)
	}
	exe := s.cfg.LocalAgentBinary
	if exe == "" {
		if exe, err = os.Executable(); err != nil {
			return fmt.Errorf("find own executable for local agents: %w", err)
		}
	}
	if err := s.prepareProviders(exe, installation); err != nil {
		return err
	}
	s.promReg = prometheus.NewRegistry()
	s.promReg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	s.metrics = metrics.New(s.promReg)
	s.metrics.WatchStore(s.promReg, s.storeHealth)
	cc := s.cfg.Controller
	cc.Calls.ServerURL, cc.Calls.InstallationID = advertise, installation
	if len(s.cfg.AgentServers) > 0 {
		cc.Calls.ServerURL = strings.Join(s.cfg.AgentServers, ",")
	}
	otelCfg := s.cfg.Telemetry
	otelCfg.Name = cmp.Or(otelCfg.Name, s.cfg.Name, installation)
	if s.otel, err = telemetry.StartServer(ctx, otelCfg, s.promReg); err != nil {
		s.listener.Close()
		return err
	}
	s.fenced = leader.Fence(s.store, s.elector)
	s.kube = target.Kubernetes(target.NoKubernetes{})
	if s.cfg.Kubernetes != nil {
		s.kube = s.cfg.Kubernetes(target.KubernetesHost{Store: s.store, Fenced: s.fenced, Reads: s.kubeReads, Sink: s.statuses,
			Trigger: func() { s.ctrl.Trigger() }, Interval: cc.Interval}, s.log, s.clock)
	}
	s.view = view.New(cc.ViewBatch, cc.ViewChangeLog)
	s.follower = view.NewFollower(s.view, s.store, s.cfg.View.Resync, s.clock, s.log)
	s.beats = heartbeat.NewBeats(s.store, s.cfg.HeartbeatFlushInterval, s.clock, s.metrics, s.log)
	s.ingest = &heartbeat.Ingester{Store: s.store, Follower: s.follower, Secrets: s.secretReader, Sink: s.statuses,
		InstanceType: s.instanceType, MemberRole: memberRole, Log: s.log}
	s.ctrl = controller.New(cc, controller.Deps{Store: s.fenced, Registry: s.registry, Signer: s.signer, Clock: s.clock, Log: s.log,
		View: s.view, Metrics: s.metrics, Tracer: s.otel.Tracer(), LivenessSince: s.livenessSince, Leading: s.elector.Leading, Heartbeats: s.beats.LayOn,
		Kubernetes: s.kube.Observations, AfterPass: s.kube.AfterPass})
	// Requests (agents' long polls, followed logs) end when the server
	// stops, instead of holding its shutdown for their full wait.
	s.http = &http.Server{Handler: s.Handler(), ReadHeaderTimeout: s.cfg.ReadHeaderTimeout, IdleTimeout: s.cfg.IdleTimeout,
		BaseContext: func(net.Listener) context.Context { return s.stopping }}
	return nil
}

// livenessSince is since when missed heartbeats count against machines:
// this server's start, the end of its store's last outage, or the start
// of its term as leader (while nobody led, or the database was away,
// heartbeats may not have been recorded), whichever is last.
func (s *Server) livenessSince() time.Time {
	since := s.startedAt
	if h := s.store.Health(); h.Healthy && h.Since.After(since) {
		since = h.Since
	}
	if term := s.elector.TermStarted(); term.After(since) {
		since = term
	}
	return since
}

func (s *Server) storeHealth() metrics.StoreHealth {
	h := s.store.Health()
	return metrics.StoreHealth{Healthy: h.Healthy, Failures: h.Failures}
}

// metaOrCreate reads a server-wide value, creating it first if need be.
// Servers that start together on one database race to create it: the
// loser reads the winner's.
func (s *Server) metaOrCreate(ctx context.Context, key string, create func() string) (string, error) {
	value, err := s.metaOrCreateOnce(ctx, key, create)
	if errors.Is(err, store.ErrExists) {
		value, err = s.metaOrCreateOnce(ctx, key, create)
	}
	return value, err
}

func (s *Server) metaOrCreateOnce(ctx context.Context, key string, create func() string) (string, error) {
	var value string
	err := s.store.Update(ctx, func(tx store.Tx) error {
		v, err := tx.GetMeta(key)
		if errors.Is(err, store.ErrNotFound) {
			value = create()
			return tx.PutMeta(key, value)
		}
		value = v
		return err
	})
	if err != nil {
		return "", fmt.Errorf("server %s: %w", key, err)
	}
	return value, nil
}

// loadOrCreateAdminToken uses the configured token, or the one in the data
// dir, or writes a new one there with mode 0600.
func loadOrCreateAdminToken(cfg Config) (string, error) {
	if cfg.AdminToken != "" {
		return cfg.AdminToken, nil
	}
	path := filepath.Join(cfg.DataDir, "admin-token")
	data, err := os.ReadFile(path)
	if err == nil && strings.TrimSpace(string(data)) != "" {
		return strings.TrimSpace(string(data)), nil
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("read admin token: %w", err)
	}
	token := auth.NewAdminToken()
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write admin token: %w", err)
	}
	return token, nil
}

// URL is where the API listens.
func (s *Server) URL() string { return s.url }

// AdminTokenPath is where a generated admin token is kept.
func (s *Server) AdminTokenPath() string { return filepath.Join(s.cfg.DataDir, "admin-token") }

// AdminToken is the API's admin token (the caller must not log it).
func (s *Server) AdminToken() string { return s.adminToken }

// Run serves the API and runs the control loop until ctx ends; then the
// loop stops, the agents' long polls end, and the HTTP server shuts down.
func (s *Server) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	loopCtx, stopLoop := context.WithCancel(context.Background())
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.elector.Run(loopCtx, func(ctx context.Context, term store.Lease) {
			s.metrics.Leading(true)
			defer s.metrics.Leading(false)
			kubeDone := make(chan struct{})
			go func() { defer close(kubeDone); s.kube.RunTerm(ctx) }()
			defer func() { <-kubeDone }()
			s.ctrl.Run(ctx)
		})
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.beats.Run(loopCtx)
	}()
	go s.signalReady(loopCtx)
	wg.Add(2)
	go func() {
		defer wg.Done()
		s.refreshNames(loopCtx)
	}()
	go func() {
		defer wg.Done()
		s.follower.Run(loopCtx)
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.keepHistory(loopCtx)
	}()
	serveErr := make(chan error, 1)
	go func() { serveErr <- s.http.Serve(s.listener) }()
	if s.cfg.PprofListen != "" {
		go s.servePprof(loopCtx)
	}
	s.log.Info("gantry server listening", "url", s.url, "dataDir", s.cfg.DataDir)
	var err error
	select {
	case <-ctx.Done():
	case err = <-serveErr:
	}
	stopLoop()
	s.stop()
	wg.Wait()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	_ = s.http.Shutdown(shutdownCtx)
	if err := s.otel.Shutdown(shutdownCtx); err != nil {
		s.log.Warn("OTLP export did not finish", "err", err)
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// TerminateAll terminates every live machine, all at once, and waits
// (`gantry dev` on exit); report is told each machine it stops.
func (s *Server) TerminateAll(ctx context.Context, reason string, report func(*api.Machine)) error {
	err := s.ctrl.TerminateAll(ctx, reason, report)
	s.local.ShutdownAll(ctx)
	return err
}

// Ready is closed once this server serves: as the leader, after the
// control loop's first pass; as a follower, once it knows another server
// leads.
func (s *Server) Ready() <-chan struct{} { return s.ready }

func (s *Server) signalReady(ctx context.Context) {
	defer close(s.ready)
	select {
	case <-s.ctrl.Ready():
	case <-s.elector.Following():
	case <-ctx.Done():
	}
}

// Leading reports whether this server runs the control loop now.
func (s *Server) Leading() bool { return s.elector.Leading() }

// Close closes the store and unlocks the data dir.
func (s *Server) Close() error {
	err := s.store.Close()
	s.lock.release()
	return err
}

// Handler serves the HTTP API and, at /ui, the dashboard over it.
func (s *Server) Handler() http.Handler {
	apiMux := s.apiHandler()
	uiCfg := s.cfg.UI
	uiCfg.SecureCookie = s.tls != nil
	limits := s.cfg.RateLimits
	uiCfg.SignInFailures = ratelimit.Config{PerSecond: limits.AuthFailureRate, Burst: limits.AuthFailureBurst, MaxKeys: limits.Callers, ReportEvery: limits.AuditEvery}
	uiCfg.SignInRefused = func(r *http.Request, l *ratelimit.Limiter, address string) {
		s.auditRejection(l, r, address, "SignInLimited")
	}
	dash, err := ui.New(uiCfg, apiMux, s.clock.Now, s.log)
	if err != nil {
		s.log.Error("dashboard disabled", "err", err)
		return apiMux
	}
	mux := http.NewServeMux()
	mux.Handle("/ui", dash.Handler())
	mux.Handle("/ui/", dash.Handler())
	for _, path := range []string{"GET /{$}", "GET /dashboard"} {
		mux.Handle(path, http.RedirectHandler("/ui/", http.StatusFound))
	}
	// The dashboard's own calls to the API are not counted as requests.
	mux.Handle("/", s.instrumented(apiMux))
	return mux
}

// apiHandler is the HTTP API alone.
func (s *Server) apiHandler() http.Handler {
	mux := http.NewServeMux()
	for _, rt := range s.routes() {
		h := rt.handler
		if mutating(rt) {
			h = s.audited(s.limited(h))
		}
		mux.HandleFunc(rt.pattern, s.guard(rt.role, h))
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, errorf(http.StatusNotFound, "not-found", "", "no route for %s %s", r.Method, r.URL.Path))
	})
	return mux
}

type route struct {
	pattern string
	role    role
	handler http.HandlerFunc
}

func (s *Server) routes() []route {
	return []route{
		{"GET /healthz", rolePublic, s.handleHealth},
		{"GET /metrics", rolePublic, promhttp.HandlerFor(s.promReg, promhttp.HandlerOpts{}).ServeHTTP},
		{"GET /v1/openapi.json", rolePublic, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(OpenAPI)
		}},
		{"POST /v1/apply", roleAdmin, s.handleApply},
		{"POST /v1/plan", roleAdmin, s.handlePlan},
		{"GET /v1/clusters", roleAdmin, s.handleListClusters},
		{"GET /v1/clusters/{name}", roleAdmin, s.handleGetCluster},
		{"PUT /v1/clusters/{name}", roleAdmin, s.handlePutCluster},
		{"DELETE /v1/clusters/{name}", roleAdmin, s.handleDeleteCluster},
		{"GET /v1/services", roleAdmin, s.handleListServices},
		{"GET /v1/services/{name}", roleAdmin, s.handleGetService},
		{"PUT /v1/services/{name}", roleAdmin, s.handlePutService},
		{"DELETE /v1/services/{name}", roleAdmin, s.handleDeleteService},
		{"PUT /v1/services/{name}/scale", roleAdmin, s.handleScale},
		{"GET /v1/failovergroups", roleAdmin, s.handleListFailoverGroups},
		{"GET /v1/failovergroups/{name}", roleAdmin, s.handleGetFailoverGroup},
		{"DELETE /v1/failovergroups/{name}", roleAdmin, s.handleDeleteFailoverGroup},
		{"POST /v1/failovergroups/{name}/promote", roleAdmin, s.handleFailoverRequest(api.FailoverPromote)},
		{"POST /v1/failovergroups/{name}/revert", roleAdmin, s.handleFailoverRequest(api.FailoverRevert)},
		{"GET /v1/services/{name}/endpoints", roleAdmin, s.handleServiceEndpoints},
		{"GET /v1/services/{name}/rollout", roleAdmin, s.handleGetRollout},
		{"POST /v1/services/{name}/rollout/undo", roleAdmin, s.handleRolloutUndo},
		{"POST /v1/services/{name}/rollout/restart", roleAdmin, s.handleRolloutRestart},
		{"POST /v1/services/{name}/rollout/pause", roleAdmin, s.handleRolloutPause},
		{"POST /v1/services/{name}/rollout/resume", roleAdmin, s.handleRolloutResume},
		{"POST /v1/services/{name}/rollout/promote", roleAdmin, s.handleRolloutPromote},
		{"GET /v1/secrets", roleAdmin, s.handleListSecrets},
		{"POST /v1/secrets", roleAdmin, s.handleCreateSecret},
		{"GET /v1/secrets/{name}", roleAdmin, s.handleGetSecret},
		{"PUT /v1/secrets/{name}", roleAdmin, s.handlePutSecret},
		{"DELETE /v1/secrets/{name}", roleAdmin, s.handleDeleteSecret},
		{"GET /v1/machines", roleAdmin, s.handleListMachines},
		{"GET /v1/machines/{id}", roleAdmin, s.handleGetMachine},
		{"POST /v1/machines/{id}/drain", roleAdmin, s.handleDrain},
		{"POST /v1/machines/{id}/cordon", roleAdmin, s.handleCordon(true)},
		{"POST /v1/machines/{id}/uncordon", roleAdmin, s.handleCordon(false)},
		{"GET /v1/replicas", roleAdmin, s.handleListReplicas},
		{"GET /v1/replicas/{id}", roleAdmin, s.handleGetReplica},
		{"DELETE /v1/replicas/{id}", roleAdmin, s.handleDeleteReplica},
		{"GET /v1/replicas/{id}/logs", roleAdmin, s.handleLogs},
		{"GET /v1/replicas/{id}/exec", roleAdminOnly, s.handleExec},
		{"GET /v1/replicas/{id}/portforward", roleAdminOnly, s.handlePortForward},
		{"GET /v1/events", roleAdmin, s.handleListEvents},
		{"GET /v1/cost", roleAdmin, s.handleCost},
		{"GET /v1/usage", roleAdmin, s.handleUsage},
		{"GET /v1/history", roleAdmin, s.handleHistory},
		{"GET /v1/traces", roleAdmin, s.handleListTraces},
		{"GET /v1/traces/{name}", roleAdmin, s.handleGetTrace},
		{"PUT /v1/traces/{name}", roleAdmin, s.handlePutTrace},
		{"DELETE /v1/traces/{name}", roleAdmin, s.handleDeleteTrace},
		{"POST /v1/simulations", roleReader, s.handleSimulate},
		{"POST /v1/join-tokens", roleAdmin, s.handleCreateJoinToken},
		{"POST /v1/tokens", roleAdmin, s.handleCreateToken},
		{"GET /v1/tokens", roleAdmin, s.handleListTokens},
		{"DELETE /v1/tokens/{id}", roleAdmin, s.handleRevokeToken},
		{"POST /v1/join", rolePublic, s.handleJoin},
		{"POST /v1/machines/{id}/heartbeat", roleMachine, s.handleHeartbeat},
		{"GET /v1/machines/{id}/assignments", roleMachine, s.handleAssignments},
		{"GET /v1/machines/{id}/log-requests", roleMachine, s.handleLogRequests},
		{"GET /v1/machines/{id}/names", roleMachine, s.handleMachineNames},
		{"GET /v1/machines/{id}/assignments/wait", roleMachine, s.handleAssignmentsWait},
		{"POST /v1/machines/{id}/log-streams/{stream}", roleMachine, s.handleLogChunk},
		{"GET /v1/machines/{id}/streams/{stream}", roleMachine, s.handleMachineStream},
	}
}
