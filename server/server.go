// Package server is `gantry server`: the HTTP API under /v1, the store,
// the providers and the control loop, assembled.
package server

import (
	"context"
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
	"github.com/gantry-dev/gantry/fleet"
	"github.com/gantry-dev/gantry/metrics"
	dockerprovider "github.com/gantry-dev/gantry/provider/docker"
	execprov "github.com/gantry-dev/gantry/provider/exec"
	"github.com/gantry-dev/gantry/provider/local"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/store"
	"github.com/gantry-dev/gantry/store/sqlite"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

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
	// AdvertiseURL is the URL agents dial; defaults to the listen address.
	AdvertiseURL string
	// MaxRequestBytes bounds request bodies.
	MaxRequestBytes int64
	// LogPollWait is the longest an agent's poll for log requests is held;
	// LogAttachTimeout the longest `gantry logs` waits for the agent.
	LogPollWait      time.Duration
	LogAttachTimeout time.Duration
	// ReadHeaderTimeout and ShutdownTimeout of the HTTP server.
	ReadHeaderTimeout time.Duration
	ShutdownTimeout   time.Duration
	Controller        controller.Config
	// Fleet: its ServerURL and InstallationID are filled in by the server.
	Fleet fleet.Config
	// WrapProvider, when set, wraps every provider (tests inject faults).
	WrapProvider func(provisioner.Provisioner) provisioner.Provisioner
	// LocalAgentBinary is what local machines run (default: this binary).
	LocalAgentBinary string
	// Local provider settings.
	LocalStopGrace      time.Duration
	LocalExitWithServer bool
	LocalAgentArgs      []string
	// LocalRuntime is the runtime local machines' agents use: process, or
	// docker for containers on this host's engine.
	LocalRuntime string
	// Docker provider settings; its StateDir defaults to DataDir/docker.
	Docker dockerprovider.Config
	// ExecConfig is the exec provider's settings file (none: no exec
	// provider).
	ExecConfig string
	// Clouds makes the cloud providers (aws, gcp, azure); nil: none.
	Clouds CloudProviders
	Store  sqlite.Config
}

// CloudProviders makes the providers whose settings come from the cluster
// spec (provider/clouds); ok is false for what is not theirs.
type CloudProviders interface {
	Names() []string
	Key(p api.ProviderSpec) (key string, ok bool, err error)
	Make(key string) (prov provisioner.Provisioner, ok bool, err error)
	Catalog(p api.ProviderSpec) ([]provisioner.InstanceType, bool)
}

// DefaultConfig returns defaults for a data directory.
func DefaultConfig(dataDir string) Config {
	return Config{
		Listen: "127.0.0.1:7400", DataDir: dataDir, MaxRequestBytes: 1 << 20,
		ReadHeaderTimeout: 10 * time.Second, ShutdownTimeout: 15 * time.Second, LogPollWait: 25 * time.Second, LogAttachTimeout: 15 * time.Second,
		Controller:     controller.DefaultConfig(),
		Fleet:          fleet.DefaultConfig("", ""),
		LocalStopGrace: 10 * time.Second, LocalRuntime: "process",
		Docker: dockerprovider.DefaultConfig(""),
		Store:  sqlite.DefaultConfig(filepath.Join(dataDir, "gantry.db")),
	}
}

// Server is a running control plane.
type Server struct {
	cfg        Config
	log        *slog.Logger
	store      store.Store
	signer     *auth.Signer
	adminToken string
	providers  *fleet.Providers
	local      *local.Provider
	docker     *dockerprovider.Provider
	exec       *execprov.Provider
	fleet      *fleet.Fleet
	ctrl       *controller.Controller
	listener   net.Listener
	url        string
	http       *http.Server
	logs       *logHub
	registry   *prometheus.Registry
	metrics    *metrics.Metrics
}

// New opens the store, prepares secrets and providers, and listens.
func New(ctx context.Context, cfg Config, log *slog.Logger) (*Server, error) {
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir %s: %w", cfg.DataDir, err)
	}
	st, err := sqlite.Open(ctx, cfg.Store)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: log, store: st, logs: newLogHub()}
	if err := s.prepare(ctx); err != nil {
		st.Close()
		return nil, err
	}
	return s, nil
}

func (s *Server) prepare(ctx context.Context) error {
	key, err := s.metaOrCreate(ctx, "join-signing-key", auth.NewKey)
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
	s.url = "http://" + s.listener.Addr().String()
	advertise := s.cfg.AdvertiseURL
	if advertise == "" {
		advertise = s.url
	}
	if err := os.WriteFile(filepath.Join(s.cfg.DataDir, "server.url"), []byte(s.url+"\n"), 0o644); err != nil {
		return fmt.Errorf("write server.url: %w", err)
	}
	exe := s.cfg.LocalAgentBinary
	if exe == "" {
		if exe, err = os.Executable(); err != nil {
			return fmt.Errorf("find own executable for local agents: %w", err)
		}
	}
	if err := s.prepareProviders(exe); err != nil {
		return err
	}
	fc := s.cfg.Fleet
	fc.ServerURL, fc.InstallationID = advertise, installation
	s.registry = prometheus.NewRegistry()
	s.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	s.metrics = metrics.New(s.registry)
	s.fleet = fleet.New(fc, s.store, s.providers, s.signer, s.log, s.metrics)
	s.ctrl = controller.New(s.cfg.Controller, s.store, s.fleet, s.providers, s.log, s.metrics)
	s.http = &http.Server{Handler: s.Handler(), ReadHeaderTimeout: s.cfg.ReadHeaderTimeout}
	return nil
}

func (s *Server) metaOrCreate(ctx context.Context, key string, create func() string) (string, error) {
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

// Run serves the API and runs the control loop until ctx ends, then shuts
// down the HTTP server and waits for background work.
func (s *Server) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	loopCtx, stopLoop := context.WithCancel(context.Background())
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.ctrl.Run(loopCtx)
	}()
	serveErr := make(chan error, 1)
	go func() { serveErr <- s.http.Serve(s.listener) }()
	s.log.Info("gantry server listening", "url", s.url, "dataDir", s.cfg.DataDir)
	var err error
	select {
	case <-ctx.Done():
	case err = <-serveErr:
	}
	stopLoop()
	wg.Wait()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	_ = s.http.Shutdown(shutdownCtx)
	s.fleet.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// TerminateAll terminates every live machine and waits (for `gantry dev`).
func (s *Server) TerminateAll(ctx context.Context, reason string) error {
	var ids []string
	err := s.store.View(ctx, func(tx store.Tx) error {
		ms, err := tx.ListMachines(store.MachineFilter{LiveOnly: true})
		for _, m := range ms {
			ids = append(ids, m.ID)
		}
		return err
	})
	if err != nil {
		return err
	}
	for _, id := range ids {
		if err := s.fleet.Terminate(ctx, id, fleet.CauseShutdown, reason); err != nil {
			s.log.Warn("terminate on shutdown", "machine", id, "err", err)
		}
	}
	s.fleet.Wait()
	s.local.ShutdownAll(ctx)
	return nil
}

// Ready is closed once the control loop has recovered the fleet and made
// its first pass.
func (s *Server) Ready() <-chan struct{} { return s.ctrl.Ready() }

// Close closes the store.
func (s *Server) Close() error { return s.store.Close() }

// Handler is the HTTP API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	for _, rt := range s.routes() {
		mux.HandleFunc(rt.pattern, s.guard(rt.role, rt.handler))
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
		{"GET /healthz", rolePublic, func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, map[string]string{"status": "ok"}) }},
		{"GET /metrics", rolePublic, promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{}).ServeHTTP},
		{"GET /v1/openapi.json", rolePublic, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(OpenAPI)
		}},
		{"POST /v1/apply", roleAdmin, s.handleApply},
		{"GET /v1/clusters", roleAdmin, s.handleListClusters},
		{"GET /v1/clusters/{name}", roleAdmin, s.handleGetCluster},
		{"PUT /v1/clusters/{name}", roleAdmin, s.handlePutCluster},
		{"DELETE /v1/clusters/{name}", roleAdmin, s.handleDeleteCluster},
		{"GET /v1/services", roleAdmin, s.handleListServices},
		{"GET /v1/services/{name}", roleAdmin, s.handleGetService},
		{"PUT /v1/services/{name}", roleAdmin, s.handlePutService},
		{"DELETE /v1/services/{name}", roleAdmin, s.handleDeleteService},
		{"GET /v1/machines", roleAdmin, s.handleListMachines},
		{"GET /v1/machines/{id}", roleAdmin, s.handleGetMachine},
		{"POST /v1/machines/{id}/drain", roleAdmin, s.handleDrain},
		{"GET /v1/replicas", roleAdmin, s.handleListReplicas},
		{"GET /v1/replicas/{id}", roleAdmin, s.handleGetReplica},
		{"GET /v1/replicas/{id}/logs", roleAdmin, s.handleLogs},
		{"GET /v1/events", roleAdmin, s.handleListEvents},
		{"POST /v1/join-tokens", roleAdmin, s.handleCreateJoinToken},
		{"POST /v1/join", rolePublic, s.handleJoin},
		{"POST /v1/machines/{id}/heartbeat", roleMachine, s.handleHeartbeat},
		{"GET /v1/machines/{id}/assignments", roleMachine, s.handleAssignments},
		{"GET /v1/machines/{id}/log-requests", roleMachine, s.handleLogRequests},
		{"POST /v1/machines/{id}/log-streams/{stream}", roleMachine, s.handleLogChunk},
	}
}
