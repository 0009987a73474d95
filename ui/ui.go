// Package ui is Gantry's web dashboard, served at /ui: pages rendered on
// the server from the HTTP API (called in process, with the signed-in
// token), made live by server-sent events that carry each page's new body
// when it changes. htmx and its SSE extension, vendored under static/,
// swap the bodies in; uPlot draws the charts and xterm.js the shell (the
// API's exec, the one thing the dashboard does beyond reading); nothing
// is built before it runs.
package ui

import (
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/client"
	"github.com/gantry-dev/gantry/internal/ratelimit"
)

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

// Config tunes the dashboard.
type Config struct {
	// SessionTTL is how long a sign-in lasts.
	SessionTTL time.Duration
	// LiveInterval is how often a live page outside the change feed
	// (events, cost) is read again, and the wait before a broken watch of
	// the others is opened again; a changed body is sent at once.
	LiveInterval time.Duration
	// PageSize is how many rows a table shows per page.
	PageSize int
	// EventLimit is how many of the latest events the events page reads.
	EventLimit int
	// LogTailLines and LogTailBytes bound the output a replica's page
	// shows; ReplicaEvents is how many of its latest events it lists.
	LogTailLines  int
	LogTailBytes  int64
	ReplicaEvents int
	// SecureCookie marks the session cookie HTTPS-only (the server sets it
	// when it serves TLS).
	SecureCookie bool
	// SignInFailures limits failed sign-ins per client address (the
	// server sets it from its own limit of failed authentications).
	SignInFailures ratelimit.Config
	// SignInRefused, when set, hears of each sign-in refused for too many
	// failures (the server audits them).
	SignInRefused func(r *http.Request, limit *ratelimit.Limiter, address string)
}

// DefaultConfig returns the dashboard's defaults.
func DefaultConfig() Config {
	return Config{SessionTTL: 12 * time.Hour, LiveInterval: time.Second, PageSize: 100, EventLimit: 500,
		LogTailLines: 200, LogTailBytes: 256 << 10, ReplicaEvents: 20,
		SignInFailures: ratelimit.Config{PerSecond: 1, Burst: 20, MaxKeys: 10_000}}
}

// Dashboard serves /ui.
type Dashboard struct {
	cfg      Config
	api      http.Handler
	log      *slog.Logger
	now      func() time.Time
	sessions *sessions
	pages    *template.Template
	// failures counts failed sign-ins per client address.
	failures *ratelimit.Limiter
}

// New returns the dashboard over api, the server's own HTTP API handler.
func New(cfg Config, api http.Handler, now func() time.Time, log *slog.Logger) (*Dashboard, error) {
	if cfg.PageSize < 1 || cfg.LiveInterval <= 0 || cfg.SessionTTL <= 0 || cfg.EventLimit < 1 || cfg.LogTailLines < 1 || cfg.LogTailBytes < 1 || cfg.ReplicaEvents < 1 {
		return nil, fmt.Errorf("ui config: PageSize, EventLimit, LiveInterval, SessionTTL, LogTailLines, LogTailBytes and ReplicaEvents must be positive")
	}
	pages, err := template.New("").Funcs(funcs()).ParseFS(templateFiles, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("ui templates: %w", err)
	}
	return &Dashboard{cfg: cfg, api: api, log: log, now: now, sessions: newSessions(cfg.SessionTTL, now), pages: pages,
		failures: ratelimit.New(cfg.SignInFailures)}, nil
}

// Handler serves /ui and everything under it.
func (d *Dashboard) Handler() http.Handler {
	static, _ := fs.Sub(staticFiles, "static")
	mux := http.NewServeMux()
	mux.Handle("GET /ui/static/", http.StripPrefix("/ui/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /ui", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ui/", http.StatusFound) })
	mux.HandleFunc("GET /ui/login", d.loginPage)
	mux.HandleFunc("POST /ui/login", d.login)
	mux.HandleFunc("POST /ui/logout", d.logout)
	mux.HandleFunc("GET /ui/stream", d.signedIn(d.stream))
	mux.HandleFunc("GET /ui/replicas/{id}/shell", d.shell)
	mux.HandleFunc("GET /ui/replicas/{id}/exec", d.execStream)
	mux.HandleFunc("GET /ui/{view...}", d.signedIn(d.page))
	return mux
}

// apiClient calls the API in process, as the holder of token.
func (d *Dashboard) apiClient(token string) *client.Client {
	return client.New("http://gantry.ui", token, &http.Client{Transport: inProcess{d.api}})
}

// inProcess serves a request with the API handler without a network.
// The body streams through a pipe, so a watch (which does not end) is
// read as it is written.
type inProcess struct{ api http.Handler }

func (t inProcess) RoundTrip(r *http.Request) (*http.Response, error) {
	body, out := io.Pipe()
	w := &pipeResponse{header: http.Header{}, out: out, started: make(chan struct{})}
	go func() {
		t.api.ServeHTTP(w, r)
		w.WriteHeader(http.StatusOK) // a handler that wrote nothing
		out.Close()
	}()
	select {
	case <-w.started:
	case <-r.Context().Done():
		body.Close()
		return nil, r.Context().Err()
	}
	return &http.Response{StatusCode: w.status, Status: http.StatusText(w.status), Header: w.sent, Body: body, Request: r,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, ContentLength: -1}, nil
}

// pipeResponse is a ResponseWriter whose body goes into a pipe.
type pipeResponse struct {
	header, sent http.Header
	status       int
	out          *io.PipeWriter
	started      chan struct{}
}

func (p *pipeResponse) Header() http.Header { return p.header }

func (p *pipeResponse) WriteHeader(status int) {
	if p.sent != nil {
		return
	}
	p.status, p.sent = status, p.header.Clone()
	close(p.started)
}

func (p *pipeResponse) Write(b []byte) (int, error) {
	p.WriteHeader(http.StatusOK)
	return p.out.Write(b)
}

// Flush: every write reaches the reader already.
func (p *pipeResponse) Flush() {}

func (d *Dashboard) signedIn(h func(http.ResponseWriter, *http.Request, *client.Client)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		token, ok := d.sessions.token(r)
		if !ok {
			if r.Header.Get("HX-Request") != "" || strings.HasSuffix(r.URL.Path, "/stream") {
				http.Error(w, "signed out", http.StatusUnauthorized)
				return
			}
			http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		h(w, r, d.apiClient(token))
	}
}

func (d *Dashboard) loginPage(w http.ResponseWriter, r *http.Request) {
	d.render(w, "login", map[string]string{})
}

// login checks the token by reading the clusters with it: an admin or a
// read-only token may; a machine credential or a join token may not.
func (d *Dashboard) login(w http.ResponseWriter, r *http.Request) {
	address := ratelimit.AddressKey(r.RemoteAddr)
	if d.failures.Exhausted(address, d.now()) {
		if d.cfg.SignInRefused != nil {
			d.cfg.SignInRefused(r, d.failures, address)
		}
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		d.render(w, "login", map[string]string{"Error": "too many failed sign-ins from this address: wait and try again"})
		return
	}
	token := strings.TrimSpace(r.PostFormValue("token"))
	if token == "" {
		w.WriteHeader(http.StatusBadRequest)
		d.render(w, "login", map[string]string{"Error": "token: enter an admin or read-only token"})
		return
	}
	if _, err := d.apiClient(token).ListClusters(r.Context()); err != nil {
		status, msg := http.StatusUnauthorized, "token: not an admin or read-only token of this server"
		var apiErr *client.APIError
		if !errors.As(err, &apiErr) || (apiErr.Status != http.StatusUnauthorized && apiErr.Status != http.StatusForbidden) {
			status, msg = http.StatusBadGateway, "the server could not check the token: "+err.Error()
		} else {
			d.failures.Allow(address, d.now())
		}
		w.WriteHeader(status)
		d.render(w, "login", map[string]string{"Error": msg})
		return
	}
	d.sessions.start(w, token, d.cfg.SecureCookie)
	d.log.Info("dashboard sign-in", "remote", r.RemoteAddr)
	http.Redirect(w, r, "/ui/", http.StatusSeeOther)
}

func (d *Dashboard) logout(w http.ResponseWriter, r *http.Request) {
	d.sessions.end(w, r)
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}

// page renders a whole page: the layout around the view's body.
func (d *Dashboard) page(w http.ResponseWriter, r *http.Request, c *client.Client) {
	v, ok := viewFor(r.PathValue("view"))
	if !ok {
		http.NotFound(w, r)
		return
	}
	body, err := d.body(r, c, v)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	styles, tail := v.assets()
	live := r.URL.RequestURI()
	if !v.live() {
		live = ""
	}
	d.render(w, "layout", layoutData{Title: v.title, Nav: v.nav, View: live, Body: body, Styles: styles, Tail: tail})
}

// layoutData is a whole page. View is the path whose body the page
// follows live ("" for a page that is not live); Styles and Scripts are
// static files the page loads in its head, Tail the scripts it runs after
// its body.
type layoutData struct {
	Title, Nav, View      string
	Body                  template.HTML
	Styles, Scripts, Tail []string
}

func (d *Dashboard) render(w http.ResponseWriter, name string, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := d.pages.ExecuteTemplate(w, name, data); err != nil {
		d.log.Warn("dashboard render failed", "template", name, "err", err)
	}
}

func (d *Dashboard) fail(w http.ResponseWriter, r *http.Request, err error) {
	var apiErr *client.APIError
	if errors.As(err, &apiErr) && apiErr.Status == http.StatusUnauthorized {
		d.sessions.end(w, r)
		http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
		return
	}
	d.log.Warn("dashboard page failed", "path", r.URL.Path, "err", err)
	http.Error(w, err.Error(), http.StatusBadGateway)
}
