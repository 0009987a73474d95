package ui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strings"

	"github.com/coder/websocket"

	"github.com/gantry-dev/gantry/api"
)

// The browser's terminal: /ui/replicas/{id}/shell is a page with
// xterm.js, whose WebSocket to /ui/replicas/{id}/exec is the API's own
// exec stream (GET /v1/replicas/{id}/exec), opened with the signed-in
// token. The API authorises it (a read-only token may not exec), audits
// it and relays it to the replica's agent; the dashboard only adds the
// token, since a browser cannot set a WebSocket's Authorization header.
// The session cookie is SameSite=Strict and the upgrade checks that the
// page's origin is this server's, so another site cannot open one.

type shellPage struct {
	Replica string
	Command string
}

func (d *Dashboard) shell(w http.ResponseWriter, r *http.Request) {
	if _, ok := d.sessions.token(r); !ok {
		http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	command := strings.TrimSpace(r.URL.Query().Get("command"))
	if command == "" {
		command = "sh"
	}
	var body bytes.Buffer
	if err := d.pages.ExecuteTemplate(&body, "shellbody", shellPage{Replica: r.PathValue("id"), Command: command}); err != nil {
		d.fail(w, r, fmt.Errorf("render shell: %w", err))
		return
	}
	d.render(w, "layout", layoutData{Title: "Shell in " + r.PathValue("id"), Nav: "replicas", Body: template.HTML(body.String()),
		Styles: []string{"xterm.css"}, Scripts: []string{"xterm.js", "addon-fit.js"}, Tail: []string{"shell.js"}})
}

// execStream hands the browser's WebSocket to the API's exec. When the
// API refuses before the upgrade (a read-only token, no such replica, a
// replica not running), the refusal is sent as the WebSocket's close
// reason, which a browser can read where it cannot read an HTTP answer
// to an upgrade.
func (d *Dashboard) execStream(w http.ResponseWriter, r *http.Request) {
	token, ok := d.sessions.token(r)
	if !ok {
		http.Error(w, "signed out", http.StatusUnauthorized)
		return
	}
	call := r.Clone(r.Context())
	call.URL.Path = "/v1/replicas/" + url.PathEscape(r.PathValue("id")) + "/exec"
	call.URL.RawPath = ""
	call.RequestURI = call.URL.RequestURI()
	call.Header.Del("Cookie")
	call.Header.Set("Authorization", "Bearer "+token)
	refusal := &refusalRecorder{ResponseWriter: w}
	d.api.ServeHTTP(refusal, call)
	if refusal.status == 0 {
		return // the stream ran
	}
	conn, err := websocket.Accept(w, r, nil)
	if err != nil {
		return // Accept answered the browser
	}
	_ = conn.Close(websocket.StatusPolicyViolation, closeReason(refusal.status, refusal.body.Bytes()))
}

// refusalRecorder passes an upgrade through to the connection and keeps
// any other answer (an error) for the caller.
type refusalRecorder struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
	header http.Header
}

func (r *refusalRecorder) Header() http.Header {
	if r.status != 0 {
		return r.header
	}
	return r.ResponseWriter.Header()
}

func (r *refusalRecorder) WriteHeader(status int) {
	switch {
	case r.status != 0:
	case status == http.StatusSwitchingProtocols:
		r.ResponseWriter.WriteHeader(status)
	default:
		r.status, r.header = status, http.Header{}
	}
}

func (r *refusalRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	return r.body.Write(b)
}

// Unwrap lets the WebSocket library reach the connection to hijack it.
func (r *refusalRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// closeReason is an API error's message, cut to what a close frame holds
// (123 bytes).
func closeReason(status int, body []byte) string {
	var e api.ErrorBody
	msg := http.StatusText(status)
	if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
		msg = e.Error.Message
	}
	const limit = 123
	if len(msg) > limit {
		msg = strings.ToValidUTF8(msg[:limit-3], "") + "..."
	}
	return msg
}
